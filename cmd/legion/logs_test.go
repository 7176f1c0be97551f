package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/journal"
)

func TestLogLine(t *testing.T) {
	at := time.Date(2026, 11, 25, 1, 2, 3, 4_000_000, time.Local)
	tests := []struct {
		e    journal.Entry
		want string
	}{
		{journal.Entry{Time: at, Unit: "legion.service", Message: "spawn session=s name=WEB-1-plan"}, "2026-11-25 01:02:03.004  helper  spawn session=s name=WEB-1-plan\n"},
		{journal.Entry{Time: at, Unit: `legion@web.service`, Message: "applied issue=WEB-1"}, "2026-11-25 01:02:03.004  controller  applied issue=WEB-1\n"},
		{journal.Entry{Time: at, Unit: `legion-0a1b2c3d-WEB\x2d1-plan.service`, Message: "agent started\nsecond line\n"}, "2026-11-25 01:02:03.004  legion-0a1b2c3d-WEB\\x2d1-plan.service  agent started\n    second line\n"},
		{journal.Entry{Time: at, Ident: "legion-pty-worker", Message: "x"}, "2026-11-25 01:02:03.004  legion-pty-worker  x\n"},
	}
	for _, tt := range tests {
		if got := logLine(tt.e, journal.Query{Team: "web"}); got != tt.want {
			t.Errorf("logLine(%+v) = %q; want %q", tt.e, got, tt.want)
		}
	}
	// What the query and the fields say is not repeated.
	e := journal.Entry{Time: at, Unit: "legion.service", Team: "web", Issue: "WEB-1", Session: "s-1", About: "legion-x.service",
		Message: `spawn team=web session=s-1 name=WEB-1-plan unit=legion-x.service issue=WEB-1 mode=plan reason="a b"`}
	for q, want := range map[journal.Query]string{
		{Team: "web"}:                 "2026-11-25 01:02:03.004  helper  spawn name=WEB-1-plan issue=WEB-1 mode=plan reason=\"a b\"\n",
		{Team: "web", Issue: "WEB-1"}: "2026-11-25 01:02:03.004  helper  spawn name=WEB-1-plan mode=plan reason=\"a b\"\n",
	} {
		if got := logLine(e, q); got != want {
			t.Errorf("logLine(%s, issue %q) = %q; want %q", e.Message, q.Issue, got, want)
		}
	}
}

// TestLogsArgs: bad arguments are usage errors (exit status 2); a team
// that is not in legion.toml says so before the journal is read.
func TestLogsArgs(t *testing.T) {
	dir := sandboxXDG(t)
	cfg := filepath.Join(dir, "legion.toml")
	if _, errOut, err := legion(t, "--config", cfg, "team", "add", "web", "--workspace", t.TempDir()); err != nil {
		t.Fatalf("team add: %v\n%s", err, errOut)
	}
	for _, args := range [][]string{{"logs"}, {"logs", "web", "WEB-1", "x"}, {"logs", "--lines", "-1", "web"}} {
		_, _, err := legion(t, append([]string{"--config", cfg}, args...)...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("legion %s: %v; want a usage error", strings.Join(args, " "), err)
		}
	}
	_, _, err := legion(t, "--config", cfg, "logs", "nosuch")
	if err == nil || !strings.Contains(err.Error(), `team "nosuch" is not in `+cfg) {
		t.Errorf("legion logs nosuch: %v; want the team named as unknown", err)
	}
}
