package githubtest

import (
	"crypto/sha1"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings are the repository's merge settings and branch protection of
// its pull requests' base.
type Settings struct {
	// MergeMethods are the merge methods the repository allows (MERGE,
	// SQUASH, REBASE); nil allows all three, GitHub's default.
	MergeMethods []string
	// RequiredChecks must have passed on the head commit before a merge
	// (branch protection's required status checks).
	RequiredChecks []string
	// RequiredApprovals is the number of approving reviews a merge needs
	// (branch protection's required reviews); 0 for none.
	RequiredApprovals int

	clock int // reviews submitted so far, for their submittedAt
}

// Review is a submitted pull request review.
type Review struct {
	Author      string
	State       string // APPROVED, CHANGES_REQUESTED, COMMENTED or DISMISSED
	Commit      string // the oid reviewed; "" for one GitHub no longer has
	SubmittedAt time.Time
}

// Check is a check of a pull request's head commit: a check run (Kind
// "CheckRun", State its status QUEUED or IN_PROGRESS, or once completed
// its conclusion SUCCESS, FAILURE, NEUTRAL, ...) or a commit status
// (Kind "StatusContext", State PENDING, SUCCESS, FAILURE or ERROR).
type Check struct {
	Kind, Name, State string
}

// reviewEpoch is when the first review is submitted; each next one a
// minute later.
var reviewEpoch = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

// AddReview submits a review of pr's current head commit by author, in
// state, and returns it.
func (s *Server) AddReview(pr *PR, author, state string) Review {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	s.touch()
	r := Review{Author: author, State: state, Commit: s.headOID(pr), SubmittedAt: reviewEpoch.Add(time.Duration(s.clock) * time.Minute)}
	pr.Reviews = append(pr.Reviews, r)
	return r
}

// Push gives pr a new head commit, as a push to its branch would, and
// returns its oid; the new commit has no checks. Without ServeGit only:
// with it, push to the served repository.
func (s *Server) Push(pr *PR) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch()
	pr.Head = fmt.Sprintf("%x", sha1.Sum([]byte("next "+s.headOID(pr))))
	pr.Checks = nil
	return pr.Head
}

// SetChecks sets the checks of pr's head commit.
func (s *Server) SetChecks(pr *PR, checks ...Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr.Checks = checks
}

// HeadOID is pr's head commit: its branch's in the served repository
// (ServeGit), else pr.Head, a made-up oid until Push changes it.
func (s *Server) HeadOID(pr *PR) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headOID(pr)
}

func (s *Server) headOID(pr *PR) string {
	if s.git != "" && pr.Base != "" {
		if oid, err := s.gitIn("rev-parse", "--verify", "-q", "refs/heads/"+pr.Branch); err == nil {
			return oid
		}
	}
	if pr.Head == "" {
		pr.Head = fmt.Sprintf("%x", sha1.Sum([]byte(pr.ID)))
	}
	return pr.Head
}

// previewMissing is GitHub's error for a query that reads a field of a
// schema preview without the preview's media type in Accept, or "".
func previewMissing(h http.Header, query string) string {
	if strings.Contains(query, "mergeStateStatus") && !strings.Contains(h.Get("Accept"), "application/vnd.github.merge-info-preview+json") {
		return "Field 'mergeStateStatus' doesn't exist on type 'PullRequest'"
	}
	return ""
}

var (
	aliasRE    = regexp.MustCompile(`(\w+): pullRequests\(headRefName: \$(\w+), first: 1, states: \[([A-Z, ]+)\]`)
	reviewsRE  = regexp.MustCompile(`reviews\(last: (\d+), states: \[([A-Z_, ]+)\]\)`)
	contextsRE = regexp.MustCompile(`contexts\(first: (\d+)\)`)
)

// handlePulls answers the operations on pull requests that read reviews,
// checks and merge settings, and the merge; ok is false for the others.
func (s *Server) handlePulls(op, query string, v map[string]any) (data any, typ, msg string, ok bool) {
	str := func(k string) string { x, _ := v[k].(string); return x }
	switch op {
	case "LegionPullRequests":
		if !strings.Contains(query, "fragment legionPR on PullRequestConnection") {
			return nil, "", "Fragment legionPR is not defined", true
		}
		repo := map[string]any{}
		for _, m := range aliasRE.FindAllStringSubmatch(query, -1) {
			alias, branch, states := m[1], str(m[2]), strings.Split(strings.ReplaceAll(m[3], " ", ""), ",")
			if branch == "" {
				return nil, "", fmt.Sprintf("Variable $%s of type String! was provided invalid value", m[2]), true
			}
			nodes := []any{}
			for i := len(s.PRs) - 1; i >= 0; i-- { // newest first
				pr := s.PRs[i]
				if pr.Branch == branch && slices.Contains(states, pr.State) {
					nodes = append(nodes, s.reviewedNode(pr, query))
					break
				}
			}
			repo[alias] = map[string]any{"nodes": nodes}
		}
		return map[string]any{"repository": repo}, "", "", true
	case "LegionPullRequest":
		num, _ := v["number"].(float64)
		repo := map[string]any{"mergeCommitAllowed": s.allows("MERGE"), "squashMergeAllowed": s.allows("SQUASH"),
			"rebaseMergeAllowed": s.allows("REBASE"), "pullRequest": nil}
		for _, pr := range s.PRs {
			if pr.Number == int(num) {
				repo["pullRequest"] = s.mergeNode(pr, query)
				return map[string]any{"repository": repo}, "", "", true
			}
		}
		return map[string]any{"repository": repo}, "NOT_FOUND", fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", int(num)), true
	case "LegionMerge":
		pr := s.byID(str("id"))
		method := str("method")
		switch {
		case pr == nil:
			return map[string]any{"mergePullRequest": nil}, "NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", str("id")), true
		case pr.State == "MERGED":
			return map[string]any{"mergePullRequest": nil}, "UNPROCESSABLE", "Pull Request is already merged", true
		case !slices.Contains([]string{"MERGE", "SQUASH", "REBASE"}, method):
			return nil, "", fmt.Sprintf("Argument 'mergeMethod' on InputObject 'MergePullRequestInput' has an invalid value (%q). Expected type 'PullRequestMergeMethod'.", method), true
		case !s.allows(method):
			what := map[string]string{"MERGE": "Merge commits", "SQUASH": "Squash merges", "REBASE": "Rebase merges"}[method]
			return map[string]any{"mergePullRequest": nil}, "UNPROCESSABLE", what + " are not allowed on this repository.", true
		case pr.Mergeable == "CONFLICTING":
			return map[string]any{"mergePullRequest": nil}, "UNPROCESSABLE", "Pull Request is not mergeable: merge conflict between base and head", true
		}
		if refusal := s.protection(pr); refusal != "" {
			return map[string]any{"mergePullRequest": nil}, "UNPROCESSABLE", refusal, true
		}
		if msg := s.mergeGit(pr, method); msg != "" {
			return map[string]any{"mergePullRequest": nil}, "UNPROCESSABLE", msg, true
		}
		pr.State, pr.MergedBy = "MERGED", method
		return map[string]any{"mergePullRequest": map[string]any{"pullRequest": map[string]any{"number": pr.Number, "state": pr.State}}}, "", "", true
	}
	return nil, "", "", false
}

// allows reports whether the repository allows merge method m.
func (s *Server) allows(m string) bool {
	return s.MergeMethods == nil || slices.Contains(s.MergeMethods, m)
}

// reviewedNode is pr with its labels and, when the query asks,
// headRefOid and reviews(last: N, states: [...]).
func (s *Server) reviewedNode(pr *PR, query string) map[string]any {
	n := s.node(pr, true)
	if strings.Contains(query, "headRefOid") {
		n["headRefOid"] = s.headOID(pr)
	}
	if m := reviewsRE.FindStringSubmatch(query); m != nil {
		last, _ := strconv.Atoi(m[1])
		states := strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
		var rs []any
		for _, r := range pr.Reviews {
			if !slices.Contains(states, r.State) {
				continue
			}
			var commit any
			if r.Commit != "" {
				commit = map[string]any{"oid": r.Commit}
			}
			var author any
			if r.Author != "" {
				author = map[string]any{"login": r.Author}
			}
			rs = append(rs, map[string]any{"state": r.State, "submittedAt": r.SubmittedAt.Format(time.RFC3339), "author": author, "commit": commit})
		}
		rs = rs[max(0, len(rs)-last):]
		n["reviews"] = map[string]any{"nodes": append([]any{}, rs...)}
	}
	return n
}

// verdict is a check's: "passed", "failed" or "pending".
func (c Check) verdict() string {
	switch c.State {
	case "SUCCESS", "NEUTRAL", "SKIPPED":
		return "passed"
	case "QUEUED", "IN_PROGRESS", "WAITING", "REQUESTED", "PENDING", "EXPECTED":
		return "pending"
	}
	return "failed"
}

// reviewDecision is GitHub's: nil without required reviews, else
// CHANGES_REQUESTED when a reviewer's latest review requests changes,
// APPROVED with enough approvals, REVIEW_REQUIRED otherwise.
func (s *Server) reviewDecision(pr *PR) any {
	if s.RequiredApprovals == 0 {
		return nil
	}
	latest := map[string]string{}
	for _, r := range pr.Reviews {
		if r.State == "APPROVED" || r.State == "CHANGES_REQUESTED" {
			latest[r.Author] = r.State
		}
	}
	approvals := 0
	for _, st := range latest {
		if st == "CHANGES_REQUESTED" {
			return "CHANGES_REQUESTED"
		}
		approvals++
	}
	if approvals >= s.RequiredApprovals {
		return "APPROVED"
	}
	return "REVIEW_REQUIRED"
}

// protection is branch protection's refusal of a merge of pr, in the
// words of GitHub's (REST's) refusals, or "".
func (s *Server) protection(pr *PR) string {
	var why []string
	for _, name := range s.RequiredChecks {
		i := slices.IndexFunc(pr.Checks, func(c Check) bool { return c.Name == name })
		switch {
		case i < 0:
			why = append(why, fmt.Sprintf("Required status check %q is expected.", name))
		case pr.Checks[i].verdict() == "pending":
			why = append(why, fmt.Sprintf("Required status check %q is in progress.", name))
		case pr.Checks[i].verdict() == "failed":
			why = append(why, fmt.Sprintf("Required status check %q is failing.", name))
		}
	}
	if d := s.reviewDecision(pr); d != nil && d != "APPROVED" {
		why = append(why, fmt.Sprintf("At least %d approving review is required by reviewers with write access.", s.RequiredApprovals))
	}
	if pr.Draft {
		why = append(why, "Pull request is in draft state.")
	}
	return strings.Join(why, " ")
}

// mergeState is GitHub's mergeStateStatus of pr.
func (s *Server) mergeState(pr *PR) string {
	switch {
	case pr.State != "OPEN":
		return "UNKNOWN"
	case pr.Mergeable == "CONFLICTING":
		return "DIRTY"
	case pr.Draft:
		return "DRAFT"
	case s.protection(pr) != "":
		return "BLOCKED"
	case slices.ContainsFunc(pr.Checks, func(c Check) bool { return c.verdict() != "passed" }):
		return "UNSTABLE"
	}
	return "CLEAN"
}

// mergeNode is pr as LegionPullRequest reads it: its merge state, review
// decision and the head commit's status check rollup (the first N
// contexts of contexts(first: N)).
func (s *Server) mergeNode(pr *PR, query string) map[string]any {
	n := s.node(pr, false)
	n["mergeStateStatus"] = s.mergeState(pr)
	n["reviewDecision"] = s.reviewDecision(pr)
	var rollup any
	if len(pr.Checks) > 0 {
		first := len(pr.Checks)
		if m := contextsRE.FindStringSubmatch(query); m != nil {
			first, _ = strconv.Atoi(m[1])
		}
		state := "SUCCESS"
		contexts := []any{}
		for i, c := range pr.Checks {
			switch c.verdict() {
			case "failed":
				state = "FAILURE"
			case "pending":
				if state != "FAILURE" {
					state = "PENDING"
				}
			}
			if i >= first {
				continue
			}
			required := slices.Contains(s.RequiredChecks, c.Name)
			if c.Kind == "StatusContext" {
				contexts = append(contexts, map[string]any{"__typename": c.Kind, "context": c.Name, "state": c.State, "isRequired": required})
				continue
			}
			run := map[string]any{"__typename": "CheckRun", "name": c.Name, "status": "COMPLETED", "conclusion": c.State, "isRequired": required}
			if c.verdict() == "pending" {
				run["status"], run["conclusion"] = c.State, nil
			}
			contexts = append(contexts, run)
		}
		rollup = map[string]any{"state": state, "contexts": map[string]any{"nodes": contexts}}
	}
	n["commits"] = map[string]any{"nodes": []any{map[string]any{"commit": map[string]any{"oid": s.headOID(pr), "statusCheckRollup": rollup}}}}
	return n
}
