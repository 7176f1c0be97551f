// Package github is Legion's review-outcome source on GitHub: for the
// branches of a team's issues (legion/<issue>) it reads each branch's pull
// request and its labels worker-approved / worker-changes-requested, and it
// merges a pull request in the finish phase.
//
// Per controller tick, PullRequests is ONE GraphQL query for all branches
// (one aliased pullRequests field per branch, Options.BatchSize branches
// per request), never one request per issue.
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
// accept it from a command line, and never write to a pull request beyond
// merging it and removing Legion's review labels.
package github
