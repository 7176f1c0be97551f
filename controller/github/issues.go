package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

// TrackerOptions say which of a repository's issues are a team's and how
// their phase is read.
type TrackerOptions struct {
	// Label opts an issue in: Legion takes the open issues that carry it,
	// never the others. DefaultLabel when empty.
	Label string
	// Statuses are the labels that carry the phases before Done (Todo
	// when an issue has none of them); Done is a closed issue.
	// DefaultStatuses fill the missing ones.
	Statuses map[controller.Status]string
	// Prefix starts the identifiers the controller and the agents use:
	// issue 12 is PREFIX-12.
	Prefix string
	// Project, when set, holds the phases in a project's field instead of
	// the status labels.
	Project *ProjectOptions
}

// DefaultLabel is the label that opts an issue in.
const DefaultLabel = "legion"

// DefaultStatuses are the status labels.
var DefaultStatuses = map[controller.Status]string{
	controller.StatusTodo:        "legion:todo",
	controller.StatusInProgress:  "legion:in-progress",
	controller.StatusNeedsReview: "legion:needs-review",
	controller.StatusRetro:       "legion:retro",
}

// phases are the statuses a label carries, from the earliest.
var phases = []controller.Status{controller.StatusTodo, controller.StatusInProgress, controller.StatusNeedsReview, controller.StatusRetro}

// Tracker is a repository's issues as a team's tracker
// (controller.Tracker). Its Issues is one query per page of 50 issues;
// the writes resolve node ids from the last Issues, or with one query.
type Tracker struct {
	c    *Client
	opts TrackerOptions

	mu     sync.Mutex
	budget controller.Budget // from the last query's rateLimit; Limit 0 before
	board  *board            // the last Board's, until a write or boardMaxAge
	issues map[int]issueRef  // by number, from the last Issues or lookup
	labels map[string]string // repository label name → node id
	repoID string
	// project is Options.Project resolved, on the first Board.
	project *project
	// writers are what GitHub said of comment authors, by login: whether
	// they may write to the repository, and when it said so.
	writers map[string]permission
}

// board is what Board read, and when.
type board struct {
	issues   []controller.TrackedIssue
	outcomes map[string]controller.Review
	at       time.Time
}

// boardMaxAge bounds how long Board answers from the last one while
// GitHub says nothing changed: what the probe cannot see (an issue that
// lost the opt-in label while another was updated later) shows by then.
const boardMaxAge = 5 * time.Minute

// Forget drops the last board, so that the next Board reads GitHub's
// (a webhook delivery said something changed).
func (t *Tracker) Forget() { t.forget() }

// forget drops the last board: Legion wrote, so the next Board reads.
func (t *Tracker) forget() {
	t.mu.Lock()
	t.board = nil
	t.mu.Unlock()
}

// issueRef is what a write needs of an issue: its node id, whether it is
// open, and its labels' node ids by name.
type issueRef struct {
	id     string
	open   bool
	opted  bool // has the opt-in label
	labels map[string]string
}

// Tracker returns the repository's issues as a team's tracker.
func (c *Client) Tracker(opts TrackerOptions) (*Tracker, error) {
	if opts.Label == "" {
		opts.Label = DefaultLabel
	}
	st := map[controller.Status]string{}
	for _, p := range phases {
		st[p] = DefaultStatuses[p]
		if l := opts.Statuses[p]; l != "" {
			st[p] = l
		}
	}
	seen := map[string]controller.Status{}
	for _, p := range phases {
		if prev, dup := seen[st[p]]; dup || st[p] == opts.Label {
			return nil, fmt.Errorf("github: the status labels of %s and %s are both %q: give each phase a label of its own, other than the opt-in label %q", prev, p, st[p], opts.Label)
		}
		seen[st[p]] = p
	}
	opts.Statuses = st
	if po := opts.Project; po != nil {
		c := *po
		if c.Number <= 0 {
			return nil, fmt.Errorf("github: project number %d: want the number in the project's URL (.../projects/N)", c.Number)
		}
		if c.Field == "" {
			c.Field = "Status"
		}
		c.Options = map[controller.Status]string{}
		seen := map[string]controller.Status{}
		for _, p := range projectPhases {
			c.Options[p] = cmp.Or(po.Options[p], DefaultProjectOptions[p])
			if prev, dup := seen[strings.ToLower(c.Options[p])]; dup {
				return nil, fmt.Errorf("github: project %d: %s and %s are both the option %q: give each phase an option of its own", c.Number, prev, p, c.Options[p])
			}
			seen[strings.ToLower(c.Options[p])] = p
		}
		opts.Project = &c
	}
	if opts.Prefix == "" {
		return nil, fmt.Errorf("github: issue prefix: want one (issue 12 is PREFIX-12)")
	}
	return &Tracker{c: c, opts: opts, issues: map[int]issueRef{}, labels: map[string]string{}, writers: map[string]permission{}}, nil
}

// Client is the client the tracker reads and writes with.
func (t *Tracker) Client() *Client { return t.c }

// ID is the identifier of issue number n.
func (t *Tracker) ID(n int) string { return t.opts.Prefix + "-" + strconv.Itoa(n) }

// Number is the issue number of id, which must be PREFIX-N.
func (t *Tracker) Number(id string) (int, error) {
	rest, ok := strings.CutPrefix(strings.ToUpper(id), strings.ToUpper(t.opts.Prefix)+"-")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil || n <= 0 {
		return 0, fmt.Errorf("issue %q of %s: want %s-N, N the GitHub issue number: %w", id, t.c.repo(), t.opts.Prefix, controller.ErrIssueNotFound)
	}
	return n, nil
}

// issuesOp is the board's query: with a project, its field's value of
// every issue too. Comments come oldest first in a connection; last: N is
// the latest N.
func (t *Tracker) issuesOp() graphql.Operation {
	if t.opts.Project == nil {
		return opIssues
	}
	return withProject(opIssues)
}

// withProject is op with the project items of each issue and the $field
// variable they need.
func withProject(op graphql.Operation) graphql.Operation {
	q := strings.Replace(op.Query, ") {", ", $field: String!) {", 1)
	q = strings.Replace(q, "  closedByPullRequestsReferences", "  "+projectItemFields+"\n  closedByPullRequestsReferences", 1)
	op.Query = q
	return op
}

var opIssues = graphql.Operation{Name: "LegionIssues", Idempotent: true, Query: `query LegionIssues($owner: String!, $name: String!, $labels: [String!], $after: String) {
  rateLimit { cost limit remaining resetAt }
  repository(owner: $owner, name: $name) {
    id
    issues(first: 50, after: $after, states: [OPEN], labels: $labels, orderBy: {field: CREATED_AT, direction: ASC}) {
      nodes { ...legionIssue }
      pageInfo { hasNextPage endCursor }
    }
  }
}
` + issueFragment}

const issueFragment = `fragment legionIssue on Issue {
  id number title state
  labels(first: 50) { nodes { id name } }
  comments(last: 50) { nodes { body createdAt authorAssociation author { login } } }
  closedByPullRequestsReferences(first: 1) { nodes { headRefName ` + prFields + ` ` + reviewFields + ` } }
}`

// maxPages bounds one Issues call (maxPages × 50 issues).
const maxPages = 200

type issueNode struct {
	ID     string `json:"id"`
	Number int    `json:"number"`
	Title  string `json:"title"`
	State  string `json:"state"` // OPEN or CLOSED
	Labels struct {
		Nodes []labelNode `json:"nodes"`
	} `json:"labels"`
	Comments struct {
		Nodes []commentNode `json:"nodes"`
	} `json:"comments"`
	// ProjectItems are the issue's items in projects (with a project).
	ProjectItems struct {
		Nodes []projectItemNode `json:"nodes"`
	} `json:"projectItems"`
	// Linked are the pull requests that close the issue ("Closes #N" in
	// their body, as Publish writes).
	Linked struct {
		Nodes []linkedPR `json:"nodes"`
	} `json:"closedByPullRequestsReferences"`
}

type linkedPR struct {
	HeadRefName string `json:"headRefName"`
	prNode
}

type labelNode struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type commentNode struct {
	Body              string    `json:"body"`
	CreatedAt         time.Time `json:"createdAt"`
	AuthorAssociation string    `json:"authorAssociation"`
	Author            *struct {
		Login string `json:"login"`
	} `json:"author"`
}

type issuesPage struct {
	rate   *rateLimit // nil when the answer had none
	repoID string
	nodes  []issueNode
	next   string // "" on the last page
}

// decodeIssuesPage decodes the data of one LegionIssues response.
func decodeIssuesPage(data []byte) (issuesPage, error) {
	var d struct {
		RateLimit  *rateLimit `json:"rateLimit"`
		Repository *struct {
			ID     string `json:"id"`
			Issues *struct {
				Nodes    []issueNode `json:"nodes"`
				PageInfo *struct {
					HasNextPage bool   `json:"hasNextPage"`
					EndCursor   string `json:"endCursor"`
				} `json:"pageInfo"`
			} `json:"issues"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return issuesPage{}, fmt.Errorf("%w: want data.repository.issues {nodes, pageInfo}: %s", ErrMalformed, graphql.JSONProblem(err))
	}
	switch {
	case d.Repository == nil:
		return issuesPage{}, fmt.Errorf("%w: want data.repository, got none", ErrMalformed)
	case d.Repository.Issues == nil || d.Repository.Issues.PageInfo == nil:
		return issuesPage{}, fmt.Errorf("%w: want data.repository.issues with pageInfo, got none", ErrMalformed)
	}
	is := d.Repository.Issues
	p := issuesPage{rate: d.RateLimit, repoID: d.Repository.ID, nodes: is.Nodes}
	if is.PageInfo.HasNextPage {
		if is.PageInfo.EndCursor == "" {
			return issuesPage{}, fmt.Errorf("%w: data.repository.issues.pageInfo has a next page but no endCursor", ErrMalformed)
		}
		p.next = is.PageInfo.EndCursor
	}
	for i, n := range p.nodes {
		if n.ID == "" || n.Number <= 0 {
			return issuesPage{}, fmt.Errorf("%w: data.repository.issues.nodes[%d] lacks id or number", ErrMalformed, i)
		}
	}
	return p, nil
}

// rateLimit is GitHub's account of a query: what it cost of the hour's
// points, and what is left until resetAt.
type rateLimit struct {
	Cost      int       `json:"cost"`
	Limit     int       `json:"limit"`
	Remaining int       `json:"remaining"`
	ResetAt   time.Time `json:"resetAt"`
}

// commentSignature ends every comment Legion posts (an HTML comment,
// which GitHub does not show), so that its own comments are told apart
// from people's although the token may be a person's.
const commentSignature = "<!-- posted by Legion -->"

// writers are the author associations of people who may write to the
// repository (its owner, members of its organization, collaborators).
// Anyone may comment on a public repository's issue; a stranger's comment
// is neither an answer nor text an agent reads. An association is not a
// permission (a member may only read, a collaborator only triage): the
// comment of such an author counts once GitHub says the login may write
// (checkWriters), which is asked once per login and writerTTL (a refusal:
// nonWriterTTL).
var writers = []string{"OWNER", "MEMBER", "COLLABORATOR"}

// permission is what GitHub said of a login: may it write, and when.
type permission struct {
	write bool
	at    time.Time
}

// How long an answer of GitHub's about a login is kept: a writer's an
// hour, a refusal ten minutes (a person given write access shows soon).
const (
	writerTTL    = time.Hour
	nonWriterTTL = 10 * time.Minute
)

// fresh says whether p is recent enough to use.
func (p permission) fresh() bool {
	ttl := nonWriterTTL
	if p.write {
		ttl = writerTTL
	}
	return !p.at.IsZero() && time.Since(p.at) < ttl
}

// checkWriters asks GitHub, for each author of nodes' comments whose
// association may write and who is not known to (within writerTTL),
// whether the login may write. A login it cannot ask about stays unknown:
// its comments are left out until it can.
func (t *Tracker) checkWriters(ctx context.Context, nodes []issueNode) {
	asked := map[string]bool{}
	for _, n := range nodes {
		for _, cm := range n.Comments.Nodes {
			if cm.Author == nil || !slices.Contains(writers, cm.AuthorAssociation) || asked[cm.Author.Login] {
				continue
			}
			login := cm.Author.Login
			asked[login] = true
			t.mu.Lock()
			known := t.writers[login]
			t.mu.Unlock()
			if known.fresh() {
				continue
			}
			ok, err := t.c.CanWrite(ctx, login)
			if err != nil {
				continue // unknown: left out, asked again next time
			}
			t.mu.Lock()
			t.writers[login] = permission{write: ok, at: time.Now()}
			t.mu.Unlock()
		}
	}
}

// tracked converts an issue node as the controller sees it. Called with
// mu held.
func (t *Tracker) tracked(n issueNode) controller.TrackedIssue {
	ti := controller.TrackedIssue{ID: t.ID(n.Number), Title: n.Title, Labels: []string{}, Status: controller.StatusTodo}
	if n.State == "CLOSED" {
		ti.Status = controller.StatusDone
	}
	if p := t.project; p != nil && ti.Status != controller.StatusDone {
		if ph, _, ok := t.projectPhase(n, p); ok {
			ti.Status = ph
		}
	}
	for _, l := range n.Labels.Nodes {
		if p, ok := t.phaseOf(l.Name); ok && t.project == nil {
			if ti.Status != controller.StatusDone && slices.Index(phases, p) > slices.Index(phases, ti.Status) {
				ti.Status = p // two status labels: the later phase
			}
			continue
		}
		if l.Name != t.opts.Label {
			ti.Labels = append(ti.Labels, l.Name)
		}
	}
	for _, cm := range n.Comments.Nodes {
		out := controller.Comment{Text: cm.Body, Time: cm.CreatedAt.UTC()}
		if text, ok := strings.CutSuffix(strings.TrimSpace(cm.Body), commentSignature); ok {
			out.Author, out.Text = controller.AuthorLegion, strings.TrimSpace(text)
		} else if cm.Author != nil && slices.Contains(writers, cm.AuthorAssociation) && t.writers[cm.Author.Login].write {
			out.Author = cm.Author.Login
		} else {
			continue
		}
		ti.Comments = append(ti.Comments, out)
	}
	slices.SortStableFunc(ti.Comments, func(a, b controller.Comment) int { return a.Time.Compare(b.Time) })
	return ti
}

// phaseOf is the status label names.
func (t *Tracker) phaseOf(label string) (controller.Status, bool) {
	for _, p := range phases {
		if t.opts.Statuses[p] == label {
			return p, true
		}
	}
	return "", false
}

// remember keeps what the writes need of n.
func (t *Tracker) remember(n issueNode) {
	ref := issueRef{id: n.ID, open: n.State != "CLOSED", labels: map[string]string{}}
	for _, l := range n.Labels.Nodes {
		ref.labels[l.Name] = l.ID
		t.labels[l.Name] = l.ID
		ref.opted = ref.opted || l.Name == t.opts.Label
	}
	t.issues[n.Number] = ref
}

// Issues implements controller.Tracker: the open issues with the opt-in
// label, oldest first, one request per page of 50.
func (t *Tracker) Issues(ctx context.Context) ([]controller.TrackedIssue, error) {
	out, _, err := t.Board(ctx)
	return out, err
}

// BoardReviews implements controller.BoardTracker: Board reads the
// outcomes the tracker's client reports as a review source.
func (t *Tracker) BoardReviews() controller.ReviewSource { return t.c }

// Board implements controller.BoardTracker: Issues, and the review
// outcome of each issue's open pull request linked to it from the issue's
// branch, in the same query.
//
// A tick that finds nothing changed costs nothing of the GraphQL budget:
// Board first asks GitHub's REST API, with conditional requests that a 304
// answers for free, whether the most recently updated opted-in issue or
// pull request changed; when neither did, and Legion wrote nothing since,
// it answers with the last board (for up to boardMaxAge). What the probes
// cannot see (a project card moved by hand, an issue that lost the opt-in
// label) shows by then, or at once with the webhook (Forget).
func (t *Tracker) Board(ctx context.Context) ([]controller.TrackedIssue, map[string]controller.Review, error) {
	if _, err := t.resolveProject(ctx); err != nil {
		return nil, nil, err
	}
	changed := t.c.boardChanged(ctx, t.opts.Label)
	t.mu.Lock()
	last := t.board
	t.mu.Unlock()
	if !changed && last != nil && time.Since(last.at) < boardMaxAge {
		t.mu.Lock()
		t.budget.TickCost = 0 // the probes' 304s cost nothing
		t.mu.Unlock()
		return slices.Clone(last.issues), maps.Clone(last.outcomes), nil
	}
	at := time.Now()
	var out []controller.TrackedIssue
	outcomes := map[string]controller.Review{}
	var nodes []issueNode
	vars := map[string]any{"owner": t.c.opts.Owner, "name": t.c.opts.Repo, "labels": []string{t.opts.Label}, "after": nil}
	op := t.issuesOp()
	if t.opts.Project != nil {
		vars["field"] = t.opts.Project.Field
	}
	repoID := ""
	var rate *rateLimit
	cost := 0
	for range maxPages {
		var raw json.RawMessage
		if err := t.c.gql.Do(ctx, op, vars, &raw); err != nil {
			return nil, nil, fmt.Errorf("issues of %s: %w", t.c.repo(), err)
		}
		p, err := decodeIssuesPage(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("issues of %s: github: %s: %w", t.c.repo(), opIssues.Name, err)
		}
		repoID = p.repoID
		if p.rate != nil {
			rate = p.rate
			cost += p.rate.Cost
		}
		nodes = append(nodes, p.nodes...)
		if p.next == "" {
			break
		}
		vars["after"] = p.next
	}
	t.checkWriters(ctx, nodes)
	t.mu.Lock()
	defer t.mu.Unlock()
	if repoID != "" {
		t.repoID = repoID
	}
	if rate != nil {
		t.budget = controller.Budget{Limit: rate.Limit, Remaining: rate.Remaining, Reset: rate.ResetAt, TickCost: cost}
	}
	for _, n := range nodes {
		t.remember(n)
		is := t.tracked(n)
		out = append(out, is)
		if pr, ok := t.linked(is.ID, n); ok && pr.Review != controller.ReviewNone {
			outcomes[is.ID] = pr.Review
		}
	}
	t.board = &board{issues: slices.Clone(out), outcomes: maps.Clone(outcomes), at: at}
	return out, outcomes, nil
}

// linked is the pull request of issue id's branch among those linked to
// node n: the open one (the query reads one open pull request per issue,
// which keeps a page of 50 issues at 3 GraphQL points).
func (t *Tracker) linked(id string, n issueNode) (PullRequest, bool) {
	branch := t.c.Branch(id)
	var best *prNode
	for i := range n.Linked.Nodes {
		l := &n.Linked.Nodes[i]
		if l.HeadRefName == branch && (l.State == "OPEN" || l.State == "MERGED") && (best == nil || l.Number > best.Number) {
			best = &l.prNode
		}
	}
	if best == nil || best.ID == "" {
		return PullRequest{}, false
	}
	return pullRequest(id, branch, *best), true
}

var opIssue = graphql.Operation{Name: "LegionIssue", Idempotent: true, Query: `query LegionIssue($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    id
    issue(number: $number) { ...legionIssue }
  }
}
` + issueFragment}

// Issue returns issue id, open or closed, whether it has the opt-in
// label or not (Opted says), with one request.
func (t *Tracker) Issue(ctx context.Context, id string) (controller.TrackedIssue, bool, error) {
	n, err := t.lookup(ctx, id)
	if err != nil {
		return controller.TrackedIssue{}, false, err
	}
	opted := slices.ContainsFunc(n.Labels.Nodes, func(l labelNode) bool { return l.Name == t.opts.Label })
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tracked(n), opted, nil
}

// lookup reads issue id.
func (t *Tracker) lookup(ctx context.Context, id string) (issueNode, error) {
	num, err := t.Number(id)
	if err != nil {
		return issueNode{}, err
	}
	var d struct {
		Repository *struct {
			ID    string     `json:"id"`
			Issue *issueNode `json:"issue"`
		} `json:"repository"`
	}
	if _, err := t.resolveProject(ctx); err != nil {
		return issueNode{}, err
	}
	op, vars := opIssue, map[string]any{"owner": t.c.opts.Owner, "name": t.c.opts.Repo, "number": num}
	if t.opts.Project != nil {
		op, vars["field"] = withProject(opIssue), t.opts.Project.Field
	}
	err = t.c.gql.Do(ctx, op, vars, &d)
	var ae *APIError
	if errors.As(err, &ae) && ae.Type == "NOT_FOUND" && strings.Contains(ae.Message, "Issue") {
		return issueNode{}, fmt.Errorf("issue %s (#%d) of %s: %w", id, num, t.c.repo(), controller.ErrIssueNotFound)
	}
	if err != nil {
		return issueNode{}, fmt.Errorf("issue %s of %s: %w", id, t.c.repo(), err)
	}
	if d.Repository == nil {
		return issueNode{}, fmt.Errorf("issue %s of %s: github: %s: %w: want data.repository, got none", id, t.c.repo(), opIssue.Name, ErrMalformed)
	}
	if d.Repository.Issue == nil {
		return issueNode{}, fmt.Errorf("issue %s (#%d) of %s: %w", id, num, t.c.repo(), controller.ErrIssueNotFound)
	}
	t.checkWriters(ctx, []issueNode{*d.Repository.Issue})
	t.mu.Lock()
	t.repoID = d.Repository.ID
	t.remember(*d.Repository.Issue)
	t.mu.Unlock()
	return *d.Repository.Issue, nil
}

// Budget implements controller.Budgeter: GitHub's GraphQL points as the
// last board's query reported them, and what the last tick cost (nothing
// when the probes found no change).
func (t *Tracker) Budget() (controller.Budget, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.budget, t.budget.Limit > 0
}

var (
	_ controller.BoardTracker = (*Tracker)(nil)
	_ controller.Budgeter     = (*Tracker)(nil)
)
