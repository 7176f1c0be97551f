package dashboard

import (
	"errors"
	"net/http"

	"github.com/legion-dev/legion/controller/workspace"
)

// handleDiff is GET /api/issues/{team}/{id}/diff: the issue's branch
// against the team's default branch and the files a merge would leave in
// conflict (workspace.Diff: git diff and git merge-tree --write-tree, which
// touch no worktree, index or ref).
func (s *sessionAPI) handleDiff(w http.ResponseWriter, r *http.Request) {
	team, id := r.PathValue("team"), r.PathValue("id")
	m, err := s.worktrees(team)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, errUnknownTeam) {
			code = http.StatusNotFound
		}
		writeError(w, code, "%s", "diff of "+id+" of team "+team+": "+err.Error())
		return
	}
	d, err := m.Diff(r.Context(), id)
	switch {
	case errors.Is(err, workspace.ErrNoBranch):
		writeError(w, http.StatusNotFound, "%s", err.Error()+" of team "+team)
	case errors.Is(err, workspace.ErrBadIssue):
		writeError(w, http.StatusBadRequest, "%s", err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%s", err.Error()+" (team "+team+")")
	default:
		writeJSON(w, http.StatusOK, d)
	}
}
