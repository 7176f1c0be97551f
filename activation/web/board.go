package web

import (
	"context"
	"net/http"
)

// teams is GET /api/teams: the configured teams' names.
func (s *Server) teams(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"teams": []string{}})
}

// board is GET /api/board?team=NAME.
func (s *Server) board(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"teams": []any{}})
}

// refreshTrackers reads every team's tracker again and returns the teams
// whose board changed.
func (s *Server) refreshTrackers(ctx context.Context) []string { return nil }
