// Package github is Legion's client of GitHub: a repository's issues as a
// team's tracker (Tracker: the opted-in issues, their phase as a status
// label or a project card, comments, labels, close/reopen), the
// review-outcome source (for the branches of a team's issues,
// legion/<issue>, each branch's pull request, its labels worker-approved /
// worker-changes-requested and its GitHub reviews), the pull request an
// issue's branch becomes (OpenPullRequest, after Legion pushes the branch
// with the token: GitURL, PushEnv, AskpassFromEnv), and its merge in the
// finish phase.
//
// Per controller tick a GitHub tracker's Board is one GraphQL query per
// page of 50 issues that also reads each issue's open linked pull request
// (its labels and reviews), so the controller sends no review query; two
// conditional REST requests before it (If-None-Match, free when GitHub
// answers 304) let an idle tick reuse the last board. Board reports
// GitHub's rateLimit (Budget) for the controller's pace.
//
// Per controller tick, PullRequests is ONE GraphQL query for all branches
// (one aliased pullRequests field per branch, Options.BatchSize branches
// per request), never one request per issue; the reviews come in the same
// query.
//
// How the outcome is read (Outcome): a pull request's outcome labels
// (ReviewOf) and its GitHub reviews (ReviewsOn) both count, whoever
// submitted them. Of the reviews (the last 20 APPROVED and
// CHANGES_REQUESTED ones are read), only those made on the head commit
// count (the review's commit is the pull request's headRefOid): once the
// implementer pushes new commits, a request for changes of the old ones
// is answered and no longer sends it back. Of one reviewer's reviews of
// the head the latest counts. When anything disagrees (two labels, two
// reviewers, a label and a review) changes requested wins: merging on a
// contradiction is the worse mistake. A changes-requested review cannot
// be removed as a label is; the implementer's next push retires it.
//
// Merging (Merge): one query reads the pull request's merge state, review
// decision and head commit's checks with the repository's merge settings,
// then one mutation merges with Options.MergeMethod (which the repository
// must allow) or else the first the repository allows of merge, squash
// and rebase. A conflict is ErrConflict. Legion merges only a pull request
// whose checks all passed: a failed or pending check (required or not), a
// review GitHub requires, requested changes, a draft or a branch behind
// its base are ErrBlocked, whose message names the checks and what a
// person does; so is GitHub's own refusal of the merge for such reasons.
//
// Access tells, in one query, what the token may do on the repository
// (its user's permission, a classic token's scopes from X-OAuth-Scopes,
// whether issues are on, the rate limit left) and Access.Missing what a
// team needs of it that it lacks, for legion doctor.
//
// Transient failures (HTTP 5xx, transport errors, rate limits: HTTP 429,
// HTTP 403 with X-RateLimit-Remaining: 0 or Retry-After, GraphQL errors of
// type RATE_LIMITED) are retried with capped, jittered exponential backoff
// that honours Retry-After and X-RateLimit-Reset and stops when the context
// ends. The merge mutation is retried only on rate limits. That mechanism
// is controller/internal/graphql's, shared with package linear; this
// package gives it what is GitHub's: the error types, the rate-limit
// signals.
//
// The package must never log the token or put it into an error, never
// accept it from a command line or pass it to git in argv, environment or
// config, never write to an issue that lacks the opt-in label, and never
// write to a pull request beyond opening it, adding and removing Legion's
// review labels and merging it: it never submits, dismisses or requests
// reviews.
package github
