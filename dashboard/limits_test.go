package dashboard_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/dashboard"
)

// TestResumeLimits: POST /api/limits/TEAM/resume ends the team's pauses at
// its agent kinds' limits, as `legion limits resume` does, and wakes its
// controller; without the token it changes nothing.
func TestResumeLimits(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	path := filepath.Join(dir, "legion.toml")
	if err := os.WriteFile(path, []byte("[teams.demo]\nid = \"6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f\"\nworkspace = \""+dir+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	state := team.StateDir(cfg.Teams[0], filepath.Join(dir, "state", "legion"))
	limits := &controller.Limits{Path: team.LimitsPath(state)}
	now := time.Now()
	st := controller.State{Now: now, KindOf: map[controller.Mode]string{controller.ModePlan: "claude"}, Issues: []controller.Issue{{ID: "DEMO-1", Status: controller.StatusTodo,
		Worker: &controller.Worker{Mode: controller.ModePlan, Session: "s", Agent: &apiAgentLimited}}}}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, p := limits.Observe(&st, nil); p != "" {
		t.Fatal(p)
	}
	s, err := dashboard.New(dashboard.Options{Token: testToken, ConfigPath: path})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)

	if resp, _ := request(t, "POST", ts.URL+"/api/limits/demo/resume", "{}", map[string]string{"Content-Type": "application/json"}); resp.StatusCode != 401 {
		t.Errorf("without the token: %s; want 401", resp.Status)
	}
	if p, _ := limits.Pauses(); !p["claude"].Paused(time.Now()) {
		t.Fatalf("claude is not paused before the resume: %+v", p["claude"])
	}
	resp, body := request(t, "POST", ts.URL+"/api/limits/demo/resume", "{}", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"})
	if resp.StatusCode != 200 || !strings.Contains(body, `"claude"`) {
		t.Fatalf("resume: %s %s; want claude resumed", resp.Status, body)
	}
	if p, _ := limits.Pauses(); p["claude"].Paused(time.Now()) {
		t.Errorf("claude still paused after the resume: %+v", p["claude"])
	}
	if _, err := os.Stat(team.WakePath(state)); err != nil {
		t.Errorf("the controller was not woken: %v", err)
	}
}

// apiAgentLimited is an agent stopped at its API's usage limit.
var apiAgentLimited = api.Agent{State: api.AgentAPIError, Since: time.Now().Add(-time.Second), Error: "rate_limit: API Error: Request rejected (429)"}
