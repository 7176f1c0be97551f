package github

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/legion-dev/legion/controller/internal/graphql"
)

var (
	opRepository = graphql.Operation{Name: "LegionRepository", Idempotent: true, Query: `query LegionRepository($owner: String!, $name: String!, $branch: String!, $label: String!) {
  repository(owner: $owner, name: $name) {
    id
    label(name: $label) { id }
    pullRequests(headRefName: $branch, first: 1, states: [OPEN], orderBy: {field: CREATED_AT, direction: DESC}) { nodes { ` + prFields + ` } }
  }
}`}
	opCreatePull = graphql.Operation{Name: "LegionCreatePullRequest", Query: `mutation LegionCreatePullRequest($repo: ID!, $base: String!, $head: String!, $title: String!, $body: String!) {
  createPullRequest(input: {repositoryId: $repo, baseRefName: $base, headRefName: $head, title: $title, body: $body}) {
    pullRequest { ` + prFields + ` }
  }
}`}
	opCreateLabel = graphql.Operation{Name: "LegionCreateLabel", Query: `mutation LegionCreateLabel($repo: ID!, $name: String!, $color: String!, $description: String!) {
  createLabel(input: {repositoryId: $repo, name: $name, color: $color, description: $description}) { label { id } }
}`}
	opAddLabels = graphql.Operation{Name: "LegionAddLabels", Idempotent: true, Query: `mutation LegionAddLabels($id: ID!, $labelIds: [ID!]!) {
  addLabelsToLabelable(input: {labelableId: $id, labelIds: $labelIds}) { clientMutationId }
}`}
)

// repository is what LegionRepository reads: the repository's node id,
// the id of one label (none when the repository has no such label) and
// the open pull request of one branch.
type repository struct {
	ID    string `json:"id"`
	Label *struct {
		ID string `json:"id"`
	} `json:"label"`
	PullRequests struct {
		Nodes []prNode `json:"nodes"`
	} `json:"pullRequests"`
}

// openPull reads the repository, label's id in it and the open pull
// request of issue's branch.
func (c *Client) openPull(ctx context.Context, issue, label string) (repository, *PullRequest, error) {
	var d struct {
		Repository *repository `json:"repository"`
	}
	branch := c.Branch(issue)
	if err := c.gql.Do(ctx, opRepository, map[string]any{"owner": c.opts.Owner, "name": c.opts.Repo, "branch": branch, "label": label}, &d); err != nil {
		return repository{}, nil, err
	}
	if d.Repository == nil || d.Repository.ID == "" {
		return repository{}, nil, fmt.Errorf("github: %s: %w: want data.repository.id, got none", opRepository.Name, ErrMalformed)
	}
	r := *d.Repository
	if len(r.PullRequests.Nodes) == 0 {
		return r, nil, nil
	}
	pr := pullRequest(issue, branch, r.PullRequests.Nodes[0])
	return r, &pr, nil
}

// OpenPullRequest opens the pull request of issue's branch into base, with
// title and body, and returns it; when the branch has an open pull request
// already, it returns that one unchanged (created is false), so that an
// implementer resumed after a review, or a retried command, opens no
// second one. The branch must have been pushed.
func (c *Client) OpenPullRequest(ctx context.Context, issue, base, title, body string) (pr PullRequest, created bool, err error) {
	branch := c.Branch(issue)
	if strings.TrimSpace(title) == "" {
		return PullRequest{}, false, fmt.Errorf("open the pull request of %s in %s: the title is empty", branch, c.repo())
	}
	r, open, err := c.openPull(ctx, issue, "")
	if err != nil {
		return PullRequest{}, false, fmt.Errorf("open the pull request of %s in %s: %w", branch, c.repo(), err)
	}
	if open != nil {
		return *open, false, nil
	}
	var m struct {
		CreatePullRequest *struct {
			PullRequest *prNode `json:"pullRequest"`
		} `json:"createPullRequest"`
	}
	err = c.gql.Do(ctx, opCreatePull, map[string]any{"repo": r.ID, "base": base, "head": branch, "title": title, "body": body}, &m)
	if err != nil {
		return PullRequest{}, false, fmt.Errorf("open the pull request of %s into %s in %s: %w", branch, base, c.repo(), err)
	}
	if m.CreatePullRequest == nil || m.CreatePullRequest.PullRequest == nil || m.CreatePullRequest.PullRequest.Number <= 0 {
		return PullRequest{}, false, fmt.Errorf("open the pull request of %s in %s: github: %s: %w: want createPullRequest.pullRequest, got none", branch, c.repo(), opCreatePull.Name, ErrMalformed)
	}
	return pullRequest(issue, branch, *m.CreatePullRequest.PullRequest), true, nil
}

// labelColors are the colours Legion gives the labels it creates.
var labelColors = map[string]string{"worker-approved": "0e8a16", "worker-changes-requested": "d93f0b"}

// AddLabel adds label to the open pull request of issue's branch (the
// reviewer's outcome, worker-approved or worker-changes-requested),
// creating the label in the repository when it has none of that name.
// Present already is not an error; no open pull request is.
func (c *Client) AddLabel(ctx context.Context, issue, label string) error {
	r, pr, err := c.openPull(ctx, issue, label)
	if err != nil {
		return fmt.Errorf("label %s %s: %w", issue, label, err)
	}
	if pr == nil {
		return fmt.Errorf("label %s %s: branch %s has no open pull request in %s: the implementer opens it (legion issue pr)", issue, label, c.Branch(issue), c.repo())
	}
	if _, ok := pr.labelIDs[label]; ok {
		return nil
	}
	var id string
	if r.Label != nil {
		id = r.Label.ID
	}
	if id == "" {
		if id, err = c.createLabel(ctx, r.ID, label); err != nil {
			return fmt.Errorf("label %s#%d %s: create the label: %w", c.repo(), pr.Number, label, err)
		}
	}
	if err := c.addLabels(ctx, pr.ID, id); err != nil {
		return fmt.Errorf("label %s#%d %s: %w", c.repo(), pr.Number, label, err)
	}
	return nil
}

// GitURL is the HTTPS address git pushes the repository to: for
// api.github.com's endpoint https://github.com/OWNER/REPO.git, for GitHub
// Enterprise's (https://HOST/api/graphql) https://HOST/OWNER/REPO.git, and
// for any other endpoint (a test's) its scheme and host.
func (c *Client) GitURL() (string, error) { return WebURL(c.opts.Endpoint, "/"+c.repo()+".git") }

// WebURL is the address of path on the web host of the GraphQL endpoint:
// github.com for api.github.com, the endpoint's own scheme and host for
// any other (GitHub Enterprise's https://HOST/api/graphql, a test's).
func WebURL(endpoint, path string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("github: the endpoint %q is not a URL: %v", endpoint, err)
	}
	host := u.Host
	if host == "api.github.com" {
		host = "github.com"
	}
	return (&url.URL{Scheme: u.Scheme, Host: host, Path: path}).String(), nil
}

// GitUser is the user name git sends with the token over HTTPS.
const GitUser = "x-access-token"

// The environment of a push (PushEnv): EnvAskpass=1 makes the legion
// program an askpass program (AskpassFromEnv), which reads the token from
// the variable named by envTokenEnv or the file named by envTokenFile:
// their names travel, never the token.
const (
	EnvAskpass   = "LEGION_GITHUB_ASKPASS"
	envTokenEnv  = "LEGION_GITHUB_TOKEN_ENV"
	envTokenFile = "LEGION_GITHUB_TOKEN_FILE"
)

// PushEnv is what git's environment needs to push to GitURL with the
// client's token: legion, the program that runs as GIT_ASKPASS, and
// where it finds the token.
func (c *Client) PushEnv(legion string) []string {
	return []string{"GIT_ASKPASS=" + legion, EnvAskpass + "=1", envTokenEnv + "=" + c.opts.TokenEnv, envTokenFile + "=" + c.opts.TokenFile}
}

// AskpassFromEnv is what the program of PushEnv answers git's prompt
// with: GitUser for the user name, the token for the password. Any other
// prompt is an error: the token goes nowhere else.
func AskpassFromEnv(prompt string, getenv func(string) string) (string, error) {
	switch p := strings.ToLower(prompt); {
	case strings.HasPrefix(p, "username"):
		return GitUser, nil
	case strings.HasPrefix(p, "password"):
		return LoadToken(getenv(envTokenEnv), getenv(envTokenFile))
	}
	return "", errors.New("github askpass: git asked neither for a user name nor for a password")
}
