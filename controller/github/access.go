package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/controller/internal/graphql"
)

// Access is what GitHub says the client's token may do on its repository.
type Access struct {
	// Login is the token's user (viewer.login).
	Login string
	// Repository is the repository's owner/name as GitHub spells it.
	Repository string
	// Permission is the user's permission on the repository
	// (viewerPermission): ADMIN, MAINTAIN, WRITE, TRIAGE or READ; "" for
	// none.
	Permission string
	// Private: the repository is private (or internal); a classic token
	// then needs the repo scope, not only public_repo.
	Private bool
	// HasIssues: the repository's issues are enabled.
	HasIssues bool
	// Scopes are a classic token's OAuth scopes, from the X-OAuth-Scopes
	// header; nil when the answer has no such header, as for fine-grained
	// tokens and GitHub Apps' tokens, whose permissions GitHub does not
	// tell (Permission is then what there is to judge by).
	Scopes []string
	// RateLimit is the GraphQL budget of the token, after this query.
	RateLimit RateLimit
	// TokensURL is where the host's tokens are made, e.g.
	// https://github.com/settings/tokens.
	TokensURL string
}

// RateLimit is GitHub's GraphQL rate limit as the rateLimit field tells
// it (the JSON names are GitHub's): points per hour, points left, what
// the query cost, when the budget is refilled.
type RateLimit struct {
	Limit     int       `json:"limit"`
	Remaining int       `json:"remaining"`
	Cost      int       `json:"cost"`
	ResetAt   time.Time `json:"resetAt"`
}

// Classic reports whether the token is a classic one: GitHub listed its
// scopes.
func (a Access) Classic() bool { return a.Scopes != nil }

// Needs are what a team asks of its token besides what every team on
// GitHub does (push its issues' branches; open, label and merge their pull
// requests).
type Needs struct {
	// Issues: the repository's issues are the team's backlog (labels,
	// comments, closing).
	Issues bool
	// Project: the team's phases are the Status field of a GitHub project
	// (Projects v2), which a classic token writes with the project scope.
	Project bool
}

// Lack is one thing a token lacks: what, and what to do about it.
type Lack struct {
	What, Fix string
	// NewToken: the fix is another token (a scope is missing), which then
	// replaces the one Legion reads.
	NewToken bool
}

// permissionRank orders viewerPermission's values; WRITE is the least
// that pushes branches and merges pull requests.
var permissionRank = map[string]int{"READ": 1, "TRIAGE": 2, "WRITE": 3, "MAINTAIN": 4, "ADMIN": 5}

// Missing is what a lacks for a team that needs n, none when nothing: the
// repository permission (WRITE or more), a classic token's scopes (repo,
// or public_repo for a public repository; project for a project's
// status), and issues enabled on the repository when they are the
// backlog. A fine-grained token's own permissions are not listed by
// GitHub, so only its user's permission is judged.
func (a Access) Missing(n Needs) []Lack {
	var out []Lack
	if permissionRank[a.Permission] < permissionRank["WRITE"] {
		perm := a.Permission
		if perm == "" {
			perm = "no"
		}
		uses := "push branches; open, label and merge pull requests"
		if n.Issues {
			uses += "; label, comment on and close issues"
		}
		out = append(out, Lack{
			What: fmt.Sprintf("%s has %s permission on %s; Legion needs WRITE (%s)", a.Login, perm, a.Repository, uses),
			Fix:  fmt.Sprintf("give %s write access to %s (Settings → Collaborators and teams), or use a token of a user who has it", a.Login, a.Repository),
		})
	}
	if !a.Classic() {
		return append(out, a.issues(n)...)
	}
	has := func(s string) bool { return slices.Contains(a.Scopes, s) }
	switch {
	case has("repo"), !a.Private && has("public_repo"):
	case a.Private:
		out = append(out, Lack{
			What: fmt.Sprintf("the token lacks the repo scope, which a private repository needs (its scopes: %s)", a.scopeList()),
			Fix:  a.newToken(n), NewToken: true,
		})
	default:
		out = append(out, Lack{
			What: fmt.Sprintf("the token lacks the repo scope (public_repo would do for the public %s; its scopes: %s)", a.Repository, a.scopeList()),
			Fix:  a.newToken(n), NewToken: true,
		})
	}
	if n.Project && !has("project") {
		out = append(out, Lack{
			What: fmt.Sprintf("the token lacks the project scope, which setting the project's Status field needs (its scopes: %s)", a.scopeList()),
			Fix:  a.newToken(n), NewToken: true,
		})
	}
	return append(out, a.issues(n)...)
}

// issues is the lack of issues on a repository whose issues are the
// backlog.
func (a Access) issues(n Needs) []Lack {
	if !n.Issues || a.HasIssues {
		return nil
	}
	return []Lack{{
		What: fmt.Sprintf("issues are disabled on %s, and they are the team's backlog", a.Repository),
		Fix:  fmt.Sprintf("enable Issues in the Settings of %s (General → Features)", a.Repository),
	}}
}

// newToken says how to get a token with all a team that needs n needs,
// the same words for every scope missing.
func (a Access) newToken(n Needs) string {
	scopes, fine := "the repo scope", "read and write access to Contents, Issues and Pull requests of "+a.Repository
	if n.Project {
		scopes, fine = "the repo and project scopes", fine+" and to Projects of its owner"
	}
	return fmt.Sprintf("create a classic token with %s at %s, or a fine-grained one with %s", scopes, a.TokensURL, fine)
}

func (a Access) scopeList() string {
	if len(a.Scopes) == 0 {
		return "none"
	}
	return strings.Join(a.Scopes, ", ")
}

// opAccess is LegionAccess: who the token is, what it may do on the
// repository, what is left of its rate limit; one request, costing one
// point.
var opAccess = graphql.Operation{Name: "LegionAccess", Idempotent: true, Query: `query LegionAccess($owner: String!, $name: String!) {
  viewer { login }
  repository(owner: $owner, name: $name) { nameWithOwner viewerPermission isPrivate hasIssuesEnabled }
  rateLimit { limit remaining cost resetAt }
}`}

// Access asks GitHub what the client's token may do on its repository,
// in one query. Its errors wrap ErrAuth (the token is rejected),
// ErrRateLimited, ErrMalformed or an *APIError; a repository that does not
// exist or that the token may not see is an *APIError of Type NOT_FOUND,
// and the error says so. Neither the error nor Access holds the token.
func (c *Client) Access(ctx context.Context) (Access, error) {
	vars := map[string]any{"owner": c.opts.Owner, "name": c.opts.Repo}
	var raw json.RawMessage
	h, err := c.gql.DoHeader(ctx, opAccess, vars, &raw)
	scopes := scopesOf(h)
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Type == "NOT_FOUND":
		hint := ""
		if scopes != nil && !slices.Contains(scopes, "repo") {
			hint = fmt.Sprintf(" (the token's scopes: %s; a private repository needs repo)", Access{Scopes: scopes}.scopeList())
		}
		return Access{}, fmt.Errorf("access to %s: the repository is not found or not visible to this token%s: %w", c.repo(), hint, err)
	case err != nil:
		return Access{}, fmt.Errorf("access to %s: %w", c.repo(), err)
	}
	a, err := decodeAccess(raw, scopes)
	if err != nil {
		return Access{}, fmt.Errorf("access to %s: github: %s: %w", c.repo(), opAccess.Name, err)
	}
	if a.TokensURL, err = WebURL(c.opts.Endpoint, TokensPath); err != nil {
		return Access{}, err
	}
	return a, nil
}

// decodeAccess decodes the data of a LegionAccess response, with the
// token's scopes (nil: not a classic token).
func decodeAccess(data []byte, scopes []string) (Access, error) {
	var d struct {
		Viewer *struct {
			Login string `json:"login"`
		} `json:"viewer"`
		Repository *struct {
			NameWithOwner    string `json:"nameWithOwner"`
			ViewerPermission string `json:"viewerPermission"`
			IsPrivate        bool   `json:"isPrivate"`
			HasIssuesEnabled bool   `json:"hasIssuesEnabled"`
		} `json:"repository"`
		RateLimit *RateLimit `json:"rateLimit"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Access{}, fmt.Errorf("%w: want data {viewer, repository, rateLimit}: %s", ErrMalformed, graphql.JSONProblem(err))
	}
	if d.Viewer == nil || d.Viewer.Login == "" || d.Repository == nil || d.Repository.NameWithOwner == "" || d.RateLimit == nil {
		return Access{}, fmt.Errorf("%w: want data.viewer.login, data.repository.nameWithOwner and data.rateLimit", ErrMalformed)
	}
	r := d.Repository
	return Access{
		Login: d.Viewer.Login, Repository: r.NameWithOwner, Permission: r.ViewerPermission,
		Private: r.IsPrivate, HasIssues: r.HasIssuesEnabled, Scopes: scopes, RateLimit: *d.RateLimit,
	}, nil
}

// scopesOf reads X-OAuth-Scopes ("repo, read:org"): nil when the header
// is absent (not a classic token), empty when it lists none.
func scopesOf(h http.Header) []string {
	v, ok := h[http.CanonicalHeaderKey("X-OAuth-Scopes")]
	if !ok {
		return nil
	}
	out := []string{}
	for _, line := range v {
		for s := range strings.SplitSeq(line, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// TokensPath is where on GitHub's web host tokens are made (WebURL).
const TokensPath = "/settings/tokens"
