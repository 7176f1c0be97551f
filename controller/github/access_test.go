package github

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller/github/githubtest"
)

// TestAccess: what the fake GitHub says of the token, read in one query
// and judged against what a team needs: WRITE permission, a classic
// token's repo (or, on a public repository, public_repo) and project
// scopes, issues enabled when they are the backlog. Each lack names what
// is missing and how to get it.
func TestAccess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		access githubtest.Access
		needs  Needs
		want   Access // Login, Permission, Private, HasIssues, Scopes
		lacks  []string
	}{
		{name: "fine-grained token, write", access: githubtest.Access{},
			want: Access{Login: "legion-bot", Permission: "WRITE", HasIssues: true}},
		{name: "fine-grained token, admin, issues as backlog", access: githubtest.Access{Login: "alice", Permission: "ADMIN"},
			needs: Needs{Issues: true, Project: true},
			want:  Access{Login: "alice", Permission: "ADMIN", HasIssues: true}},
		{name: "classic token with repo, private", access: githubtest.Access{Private: true, Scopes: []string{"repo", "read:org"}},
			want: Access{Login: "legion-bot", Permission: "WRITE", Private: true, HasIssues: true, Scopes: []string{"repo", "read:org"}}},
		{name: "classic token with public_repo, public", access: githubtest.Access{Scopes: []string{"public_repo"}},
			want: Access{Login: "legion-bot", Permission: "WRITE", HasIssues: true, Scopes: []string{"public_repo"}}},
		{name: "read permission", access: githubtest.Access{Permission: "READ"},
			needs: Needs{Issues: true},
			want:  Access{Login: "legion-bot", Permission: "READ", HasIssues: true},
			lacks: []string{"legion-bot has READ permission on legion-dev/demo; Legion needs WRITE (push branches; open, label and merge pull requests; label, comment on and close issues)"}},
		{name: "triage permission", access: githubtest.Access{Permission: "TRIAGE"},
			want:  Access{Login: "legion-bot", Permission: "TRIAGE", HasIssues: true},
			lacks: []string{"legion-bot has TRIAGE permission on legion-dev/demo; Legion needs WRITE (push branches; open, label and merge pull requests)"}},
		{name: "classic token without repo", access: githubtest.Access{Scopes: []string{"read:org", "gist"}},
			want:  Access{Login: "legion-bot", Permission: "WRITE", HasIssues: true, Scopes: []string{"read:org", "gist"}},
			lacks: []string{"the token lacks the repo scope (public_repo would do for the public legion-dev/demo; its scopes: read:org, gist)"}},
		{name: "classic token without any scope", access: githubtest.Access{Scopes: []string{}},
			want:  Access{Login: "legion-bot", Permission: "WRITE", HasIssues: true, Scopes: []string{}},
			lacks: []string{"the token lacks the repo scope (public_repo would do for the public legion-dev/demo; its scopes: none)"}},
		{name: "classic token without project", access: githubtest.Access{Scopes: []string{"repo"}},
			needs: Needs{Project: true},
			want:  Access{Login: "legion-bot", Permission: "WRITE", HasIssues: true, Scopes: []string{"repo"}},
			lacks: []string{"the token lacks the project scope, which setting the project's Status field needs (its scopes: repo)"}},
		{name: "issues disabled", access: githubtest.Access{IssuesDisabled: true},
			needs: Needs{Issues: true},
			want:  Access{Login: "legion-bot", Permission: "WRITE"},
			lacks: []string{"issues are disabled on legion-dev/demo, and they are the team's backlog"}},
		{name: "issues disabled, reviews only", access: githubtest.Access{IssuesDisabled: true},
			want: Access{Login: "legion-bot", Permission: "WRITE"}},
		{name: "everything missing", access: githubtest.Access{Permission: "READ", Scopes: []string{"public_repo"}, IssuesDisabled: true},
			needs: Needs{Issues: true, Project: true},
			want:  Access{Login: "legion-bot", Permission: "READ", Scopes: []string{"public_repo"}},
			lacks: []string{
				"legion-bot has READ permission on legion-dev/demo; Legion needs WRITE (push branches; open, label and merge pull requests; label, comment on and close issues)",
				"the token lacks the project scope, which setting the project's Status field needs (its scopes: public_repo)",
				"issues are disabled on legion-dev/demo, and they are the team's backlog",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			srv.SetAccess(tc.access)
			a, err := c.Access(t.Context())
			if err != nil {
				t.Fatalf("Access: %v", err)
			}
			if n := srv.Calls("LegionAccess"); n != 1 {
				t.Errorf("LegionAccess requests = %d; want 1", n)
			}
			tc.want.Repository = "legion-dev/demo"
			tc.want.TokensURL = srv.URL + "/settings/tokens"
			tc.want.RateLimit = RateLimit{Limit: 5000, Remaining: 4999, Cost: 1, ResetAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			if diff := cmp.Diff(tc.want, a); diff != "" {
				t.Errorf("Access() mismatch (-want +got):\n%s", diff)
			}
			var lacks []string
			for _, l := range a.Missing(tc.needs) {
				lacks = append(lacks, l.What)
				if l.Fix == "" {
					t.Errorf("lack %q has no fix", l.What)
				}
			}
			if diff := cmp.Diff(tc.lacks, lacks); diff != "" {
				t.Errorf("Missing(%+v) mismatch (-want +got):\n%s", tc.needs, diff)
			}
		})
	}
}

// TestAccessFixes: a missing scope's fix says which token to make, with
// everything the team needs (the same words for each scope missing), and
// where on the host it is made.
func TestAccessFixes(t *testing.T) {
	a := Access{Login: "bot", Repository: "acme/web", Permission: "READ", Private: true, Scopes: []string{"read:org"}, TokensURL: "https://github.com/settings/tokens"}
	got := a.Missing(Needs{Project: true})
	want := []Lack{
		{What: "bot has READ permission on acme/web; Legion needs WRITE (push branches; open, label and merge pull requests)",
			Fix: "give bot write access to acme/web (Settings → Collaborators and teams), or use a token of a user who has it"},
		{What: "the token lacks the repo scope, which a private repository needs (its scopes: read:org)",
			Fix: "create a classic token with the repo and project scopes at https://github.com/settings/tokens, or a fine-grained one with read and write access to Contents, Issues and Pull requests of acme/web and to Projects of its owner", NewToken: true},
		{What: "the token lacks the project scope, which setting the project's Status field needs (its scopes: read:org)",
			Fix: "create a classic token with the repo and project scopes at https://github.com/settings/tokens, or a fine-grained one with read and write access to Contents, Issues and Pull requests of acme/web and to Projects of its owner", NewToken: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Missing() mismatch (-want +got):\n%s", diff)
	}
}

// TestAccessFailures: a repository the token cannot see, a rejected
// token, an answer that is not LegionAccess's: each error says which, and
// none holds the token.
func TestAccessFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   func(*Options)
		srv    func(*githubtest.Server)
		is     error  // errors.Is
		typ    string // the *APIError's Type
		substr string
	}{
		{name: "unknown repository", opts: func(o *Options) { o.Repo = "nope" },
			typ: "NOT_FOUND", substr: "access to legion-dev/nope: the repository is not found or not visible to this token: github: LegionAccess: Could not resolve to a Repository with the name 'legion-dev/nope'. (NOT_FOUND)"},
		{name: "repository the fine-grained token does not list", srv: func(s *githubtest.Server) { s.SetAccess(githubtest.Access{Hidden: true}) },
			typ: "NOT_FOUND", substr: "access to legion-dev/demo: the repository is not found or not visible to this token: "},
		{name: "private repository, classic token with public_repo", srv: func(s *githubtest.Server) {
			s.SetAccess(githubtest.Access{Private: true, Scopes: []string{"public_repo"}})
		}, typ: "NOT_FOUND", substr: "not visible to this token (the token's scopes: public_repo; a private repository needs repo)"},
		{name: "token rejected", srv: func(s *githubtest.Server) {
			s.Lock()
			s.Token = "ghp_someone_else"
			s.Unlock()
		}, is: ErrAuth, substr: "access to legion-dev/demo: github: authentication failed: check the token in $" + testEnv + " (GitHub says: Bad credentials)"},
		{name: "forbidden", srv: func(s *githubtest.Server) {
			s.Inject(githubtest.Reply{Status: 200, Body: `{"data":{"viewer":{"login":"x"},"repository":null,"rateLimit":null},"errors":[{"type":"FORBIDDEN","message":"Resource protected by organization SAML enforcement."}]}`})
		}, typ: "FORBIDDEN", substr: "access to legion-dev/demo: github: LegionAccess: Resource protected by organization SAML enforcement. (FORBIDDEN)"},
		{name: "no repository in the answer", srv: func(s *githubtest.Server) {
			s.Inject(githubtest.Reply{Status: 200, Body: `{"data":{"viewer":{"login":"x"},"repository":null,"rateLimit":{"limit":1}}}`})
		}, is: ErrMalformed, substr: "access to legion-dev/demo: github: LegionAccess: malformed response: want data.viewer.login, data.repository.nameWithOwner and data.rateLimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, tc.opts)
			if tc.srv != nil {
				tc.srv(srv)
			}
			a, err := c.Access(t.Context())
			if err == nil {
				t.Fatalf("Access() = %+v; want an error", a)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Access() error = %v; want %v", err, tc.is)
			}
			var ae *APIError
			if tc.typ != "" && (!errors.As(err, &ae) || ae.Type != tc.typ) {
				t.Errorf("Access() error = %v; want an *APIError of type %s", err, tc.typ)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("Access() error = %q; want it to contain %q", err, tc.substr)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("Access() error %q contains the token", err)
			}
			if n := srv.Calls(""); n != 1 {
				t.Errorf("requests = %d; want 1 (nothing here is retried)", n)
			}
		})
	}
}

// TestWebURL: tokens are made, and repositories pushed to, on the web
// host of the API endpoint.
func TestWebURL(t *testing.T) {
	for _, tc := range []struct{ endpoint, want string }{
		{DefaultEndpoint, "https://github.com/settings/tokens"},
		{"https://ghe.example.com/api/graphql", "https://ghe.example.com/settings/tokens"},
		{"http://127.0.0.1:8080/graphql", "http://127.0.0.1:8080/settings/tokens"},
	} {
		if got, err := WebURL(tc.endpoint, TokensPath); err != nil || got != tc.want {
			t.Errorf("WebURL(%q, TokensPath) = %q, %v; want %q", tc.endpoint, got, err, tc.want)
		}
	}
	if got, err := WebURL("not a url", TokensPath); err == nil {
		t.Errorf("WebURL(not a url) = %q; want an error", got)
	}
}

func TestScopesOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want []string
	}{
		{"no header", http.Header{}, nil},
		{"nil header", nil, nil},
		{"empty", http.Header{"X-Oauth-Scopes": {""}}, []string{}},
		{"several", http.Header{"X-Oauth-Scopes": {"repo, read:org,project , "}}, []string{"repo", "read:org", "project"}},
	} {
		if got := scopesOf(tc.h); !cmp.Equal(tc.want, got) || (tc.want == nil) != (got == nil) {
			t.Errorf("%s: scopesOf(%v) = %#v; want %#v", tc.name, tc.h, got, tc.want)
		}
	}
}
