package githubtest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// touch records that the repository's issues or pull requests changed:
// the REST lists' answers, and so their ETags, change with it. Called
// with mu held.
func (s *Server) touch() { s.stamp++ }

// Touch is touch for a test that changed the exported fields.
func (s *Server) Touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch()
}

// RESTCalls counts the REST requests by status: 200 (counted against
// GitHub's REST rate limit) and 304 (not counted).
func (s *Server) RESTCalls() (ok, notModified int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restOK, s.rest304
}

// serveREST answers the two lists Legion asks with conditional requests
// (GET /repos/OWNER/REPO/issues and /pulls): the most recently updated
// item, an ETag of the answer's body (as GitHub's), and 304 Not Modified
// for an If-None-Match that matches, with GitHub's rate-limit headers.
func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token") || token != s.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
		return
	}
	base := "/repos/" + s.Owner + "/" + s.Repo
	if login, ok := strings.CutPrefix(r.URL.Path, base+"/collaborators/"); ok && strings.HasSuffix(login, "/permission") {
		login = strings.TrimSuffix(login, "/permission")
		perm := s.permissions[login]
		if perm == "" {
			perm = "none"
		}
		s.restOK++
		writeJSON(w, http.StatusOK, map[string]any{"permission": perm, "role_name": perm, "user": map[string]any{"login": login}})
		return
	}
	var kind string
	switch r.URL.Path {
	case base + "/issues":
		kind = "issue"
	case base + "/pulls":
		kind = "pull"
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
		return
	}
	// The answer's content: what changed last. Any change to the
	// repository's issues or pull requests changes it.
	body, _ := json.Marshal([]any{map[string]any{"kind": kind, "updated_at": time.Unix(int64(1767225600+s.stamp), 0).UTC().Format(time.RFC3339), "stamp": s.stamp}})
	etag := fmt.Sprintf(`W/"%x"`, sha256.Sum256(body))
	w.Header().Set("ETag", etag)
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Resource", "core")
	if r.Header.Get("If-None-Match") == etag {
		s.rest304++
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.restOK++
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(body)
}

// SetPermission sets login's permission on the repository (admin,
// maintain, write, triage, read or none), as GitHub's
// collaborators/LOGIN/permission reports it.
func (s *Server) SetPermission(login, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.permissions[login] = permission
}
