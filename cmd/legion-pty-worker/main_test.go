package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/ptyworker/proto"
)

func TestRun(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"help", []string{"--help"}, 0, "", "Usage: legion-pty-worker --spec FILE"},
		{"version", []string{"--version"}, 0, "legion-pty-worker dev\n", ""},
		{"no spec", nil, 2, "", "--spec FILE is required"},
		{"extra argument", []string{"--spec", bad, "more"}, 2, "", `unexpected argument "more"`},
		{"unknown flag", []string{"--nope"}, 2, "", "flag provided but not defined: -nope"},
		// 65: the unit does not restart on it, and the next dispatch
		// starts a fresh worker on a new spec (proto.ExitSpecUnreadable).
		{"missing spec file", []string{"--spec", "/nonexistent/spec.json"}, proto.ExitSpecUnreadable, "", "/nonexistent/spec.json"},
		{"malformed spec file", []string{"--spec", bad}, proto.ExitSpecUnreadable, "", "moved aside to " + bad + ".corrupt-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.code || stdout.String() != tt.stdout && tt.stdout != "" || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, stdout %q, stderr containing %q",
					tt.args, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestRunStartFailures: a prepare command that fails exits 1, which
// systemd and a Job retry; an agent that cannot be started exits 78,
// which they do not.
func TestRunStartFailures(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		prepare [][]string
		code    int
		stderr  string
	}{
		{"prepare fails", []string{"/bin/true"}, [][]string{{"/bin/sh", "-c", "echo no repo >&2; exit 4"}}, 1, "prepare: sh: exit 4: no repo"},
		{"agent missing", []string{"/nonexistent/agent"}, nil, proto.ExitAgentNotStartable, "exec /nonexistent/agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := os.MkdirTemp("", "lw") // short: the socket's path must fit
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			tok, err := proto.NewToken()
			if err != nil {
				t.Fatal(err)
			}
			spec := &proto.Spec{
				Version: proto.SpecVersion, SessionID: uuid.NewString(), Name: "s", Team: "t", TeamShort: "0123abcd",
				Cwd: root, ArgvNew: tt.argv, Prepare: tt.prepare, Token: tok, DaemonInstanceID: "d",
				Paths: proto.Paths{RuntimeDir: filepath.Join(root, "run"), StateDir: filepath.Join(root, "state")},
			}
			path := filepath.Join(root, "spec.json")
			if err := proto.WriteSpec(path, spec); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"--spec", path}, &stdout, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("run = %d, stderr %q; want %d, stderr containing %q", code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
}
