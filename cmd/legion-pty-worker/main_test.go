package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"missing spec file", []string{"--spec", "/nonexistent/spec.json"}, 1, "", "/nonexistent/spec.json"},
		{"malformed spec file", []string{"--spec", bad}, 1, "", bad},
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
