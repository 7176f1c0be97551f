package githubtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Access is what the fake says of its token: who it is, what it may do on
// the repository, its rate limit. The zero value is a fine-grained token
// of legion-bot with WRITE permission on a public repository whose issues
// are enabled, with 4999 of 5000 points left.
type Access struct {
	// Login is viewer.login; "legion-bot" when "".
	Login string
	// Permission is viewerPermission: ADMIN, MAINTAIN, WRITE, TRIAGE or
	// READ; WRITE when "".
	Permission string
	// Private makes the repository private: a classic token without the
	// repo scope then does not see it (NOT_FOUND), as on GitHub.
	Private bool
	// Hidden: the token does not see the repository at all (NOT_FOUND), as
	// a fine-grained token that does not list it.
	Hidden bool
	// IssuesDisabled turns hasIssuesEnabled off.
	IssuesDisabled bool
	// Scopes make the token a classic one: every authenticated answer
	// carries X-OAuth-Scopes with them (empty when the slice is empty but
	// not nil). Nil sends no such header, as for a fine-grained token.
	Scopes []string
	// Limit and Remaining are rateLimit's; 5000 and 4999 when zero.
	Limit, Remaining int
}

// SetAccess sets what the fake says of its token.
func (s *Server) SetAccess(a Access) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access = a
}

// writeScopes puts a classic token's X-OAuth-Scopes on an authenticated
// answer, in GitHub's format ("repo, read:org").
func (s *Server) writeScopes(w http.ResponseWriter) {
	s.mu.Lock()
	scopes := s.access.Scopes
	s.mu.Unlock()
	if scopes != nil {
		w.Header().Set("X-OAuth-Scopes", strings.Join(scopes, ", "))
	}
}

// accessData answers LegionAccess (viewer, repository, rateLimit) for
// owner/name; called with s.mu held.
func (s *Server) accessData(owner, name string) (any, string, string) {
	a := s.access
	login := a.Login
	if login == "" {
		login = "legion-bot"
	}
	limit, remaining := a.Limit, a.Remaining
	if limit == 0 {
		limit, remaining = 5000, 4999
	}
	data := map[string]any{
		"viewer":    map[string]any{"login": login},
		"rateLimit": map[string]any{"limit": limit, "remaining": remaining, "cost": 1, "resetAt": "2026-01-02T03:04:05Z"},
	}
	blind := a.Private && a.Scopes != nil && !slices.Contains(a.Scopes, "repo")
	if owner != s.Owner || name != s.Repo || a.Hidden || blind {
		data["repository"] = nil
		return data, "NOT_FOUND", fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name)
	}
	perm := a.Permission
	if perm == "" {
		perm = "WRITE"
	}
	data["repository"] = map[string]any{
		"nameWithOwner": s.Owner + "/" + s.Repo, "viewerPermission": perm,
		"isPrivate": a.Private, "hasIssuesEnabled": !a.IssuesDisabled,
	}
	return data, "", ""
}
