package github

import (
	"fmt"
	"slices"
	"strings"
)

// mergeRepository is what LegionPullRequest reads: the repository's merge
// settings and the pull request with its merge state.
type mergeRepository struct {
	mergeSettings
	PullRequest *mergePR `json:"pullRequest"`
}

// mergeSettings are the merge methods the repository allows; nil when the
// answer lacks them.
type mergeSettings struct {
	MergeCommitAllowed *bool `json:"mergeCommitAllowed"`
	SquashMergeAllowed *bool `json:"squashMergeAllowed"`
	RebaseMergeAllowed *bool `json:"rebaseMergeAllowed"`
}

// allowed returns the methods allowed, in the order merge, squash, rebase.
func (s mergeSettings) allowed() ([]string, error) {
	var out []string
	for _, m := range []struct {
		allowed *bool
		method  string
	}{{s.MergeCommitAllowed, "MERGE"}, {s.SquashMergeAllowed, "SQUASH"}, {s.RebaseMergeAllowed, "REBASE"}} {
		if m.allowed == nil {
			return nil, fmt.Errorf("%w: want the repository's mergeCommitAllowed, squashMergeAllowed and rebaseMergeAllowed", ErrMalformed)
		}
		if *m.allowed {
			out = append(out, m.method)
		}
	}
	return out, nil
}

// mergeMethod is the method to merge with: Options.MergeMethod when set,
// which the repository must allow, else the first the repository allows
// of merge, squash and rebase.
func (c *Client) mergeMethod(s mergeSettings) (string, error) {
	allowed, err := s.allowed()
	if err != nil {
		return "", fmt.Errorf("github: %s: %w", opPullRequest.Name, err)
	}
	names := strings.ToLower(strings.Join(allowed, ", "))
	switch {
	case len(allowed) == 0:
		return "", fmt.Errorf("github: the repository %s allows no merge method (its settings, Pull Requests: allow merge commits, squash merging or rebase merging)", c.repo())
	case c.opts.MergeMethod == "":
		return allowed[0], nil
	case !slices.Contains(allowed, c.opts.MergeMethod):
		return "", fmt.Errorf("github: merge method %q (github.merge_method) is not allowed by the repository %s, which allows %s: set one of those, or allow it in the repository's settings",
			strings.ToLower(c.opts.MergeMethod), c.repo(), names)
	}
	return c.opts.MergeMethod, nil
}

// mergePR is a pull request as Merge reads it.
type mergePR struct {
	ID               string `json:"id"`
	Number           int    `json:"number"`
	State            string `json:"state"`
	URL              string `json:"url"`
	Mergeable        string `json:"mergeable"`        // MERGEABLE, CONFLICTING or UNKNOWN
	MergeStateStatus string `json:"mergeStateStatus"` // CLEAN, BLOCKED, UNSTABLE, DIRTY, BEHIND, DRAFT, HAS_HOOKS, UNKNOWN
	ReviewDecision   string `json:"reviewDecision"`   // APPROVED, CHANGES_REQUESTED, REVIEW_REQUIRED or null
	Commits          struct {
		Nodes []struct {
			Commit struct {
				OID               string `json:"oid"`
				StatusCheckRollup *struct {
					State    string `json:"state"` // SUCCESS, PENDING, FAILURE, ERROR, EXPECTED
					Contexts struct {
						Nodes []checkNode `json:"nodes"`
					} `json:"contexts"`
				} `json:"statusCheckRollup"`
			} `json:"commit"`
		} `json:"nodes"`
	} `json:"commits"`
}

// checkNode is a StatusCheckRollupContext: a CheckRun (name, status,
// conclusion) or a StatusContext (context, state).
type checkNode struct {
	Typename   string `json:"__typename"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	Context    string `json:"context"`
	State      string `json:"state"`
	IsRequired bool   `json:"isRequired"`
}

// verdict is a check's: "passed", "failed" or "pending".
func (n checkNode) verdict() (name, verdict string) {
	if n.Typename == "StatusContext" {
		switch n.State {
		case "SUCCESS":
			return n.Context, "passed"
		case "FAILURE", "ERROR":
			return n.Context, "failed"
		}
		return n.Context, "pending" // PENDING, EXPECTED
	}
	switch {
	case n.Status != "COMPLETED":
		return n.Name, "pending" // QUEUED, IN_PROGRESS, WAITING, REQUESTED, PENDING
	case n.Conclusion == "SUCCESS" || n.Conclusion == "NEUTRAL" || n.Conclusion == "SKIPPED":
		return n.Name, "passed"
	}
	return n.Name, "failed" // FAILURE, TIMED_OUT, CANCELLED, ACTION_REQUIRED, STARTUP_FAILURE, STALE
}

// checks says which of the head commit's checks (the first page of its
// status check rollup) failed and which are pending, required ones
// marked; nothing when all passed.
func (pr mergePR) checks() []string {
	if len(pr.Commits.Nodes) == 0 || pr.Commits.Nodes[0].Commit.StatusCheckRollup == nil {
		return nil
	}
	roll := pr.Commits.Nodes[0].Commit.StatusCheckRollup
	by := map[string][]string{}
	for _, n := range roll.Contexts.Nodes {
		name, v := n.verdict()
		if name == "" {
			name = "(unnamed)"
		}
		if n.IsRequired {
			name += " (required)"
		}
		by[v] = append(by[v], name)
	}
	var out []string
	if len(by["failed"]) > 0 {
		out = append(out, "checks failed: "+strings.Join(by["failed"], ", "))
	}
	if len(by["pending"]) > 0 {
		out = append(out, "checks pending: "+strings.Join(by["pending"], ", "))
	}
	if len(out) == 0 && roll.State != "" && roll.State != "SUCCESS" {
		out = append(out, fmt.Sprintf("the checks are %s", roll.State))
	}
	return out
}

// blocked says why Legion does not merge pr, or nothing: it merges only a
// pull request whose checks all passed (required or not: failing or
// pending, the implementer's work is not done) and that GitHub does not
// hold back (mergeStateStatus BLOCKED, UNSTABLE or DRAFT, reviewDecision
// REVIEW_REQUIRED or CHANGES_REQUESTED). A branch GitHub wants up to date
// (BEHIND) is left to GitHub to refuse: not every BEHIND branch is.
func (pr mergePR) blocked() []string {
	why := pr.checks()
	switch pr.ReviewDecision {
	case "REVIEW_REQUIRED":
		why = append(why, "the repository requires an approving review (reviewDecision REVIEW_REQUIRED): someone with write access, not the token's own user, approves it on GitHub")
	case "CHANGES_REQUESTED":
		why = append(why, "a reviewer requested changes on GitHub (reviewDecision CHANGES_REQUESTED)")
	}
	switch pr.MergeStateStatus {
	case "DRAFT":
		why = append(why, "the pull request is a draft (mergeStateStatus DRAFT): mark it ready for review")
	case "BLOCKED", "UNSTABLE":
		if len(why) == 0 {
			why = append(why, fmt.Sprintf("GitHub holds it back (mergeStateStatus %s): see the pull request's merge box", pr.MergeStateStatus))
		}
	}
	if len(why) > 0 && pr.URL != "" {
		why = append(why, "see "+pr.URL)
	}
	return why
}

// afterBlocked is what a person does about ErrBlocked.
const afterBlocked = "when that is resolved run the finish again, or merge the pull request on GitHub yourself (the finish then finds it merged)"

// refusedAsBlocked reports whether GitHub's refusal of a merge (its
// message, lower case) is for checks, reviews or rules, not conflicts.
func refusedAsBlocked(msg string) bool {
	for _, s := range []string{"status check", "approving review", "review is required", "changes requested", "rule violation", "protected branch", "draft", "out of date", "out-of-date"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
