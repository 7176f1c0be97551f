package ptyworker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestStartFailureCause: an agent that cannot be started, for a reason a
// restart repeats, makes Run fail with ErrAgentNotStartable and a cause a
// person can act on; the registry's last exit holds the same cause.
func TestStartFailureCause(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "/nonexistent/bin:/usr/bin:/bin")
	tests := []struct {
		name string
		argv []string
		cwd  string // "": the spec's
		want string
	}{
		{"not in PATH", []string{"legion-test-no-such-agent", "--flag"}, "",
			"exec legion-test-no-such-agent: executable file not found in $PATH (PATH=/nonexistent/bin:/usr/bin:/bin)"},
		{"no such file", []string{"/nonexistent/agent"}, "", "exec /nonexistent/agent in "},
		{"not executable", []string{notExec}, "", "permission denied"},
		{"a directory", []string{dir}, "", "exec " + dir},
		{"no such cwd", []string{"/bin/true"}, filepath.Join(dir, "gone"), "its working directory: stat " + filepath.Join(dir, "gone")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, tc.argv...)
			if tc.cwd != "" {
				spec.Cwd = tc.cwd
			}
			err := Run(ctxT(t), spec, Options{Logger: testLogger(t)})
			if !errors.Is(err, ErrAgentNotStartable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run(%q in %s) = %v; want ErrAgentNotStartable saying %q", tc.argv, spec.Cwd, err, tc.want)
			}
			r, rerr := proto.ReadRegistry(spec.RegistryPath())
			if rerr != nil || r.LastExit == nil || !strings.HasPrefix(r.LastExit.Reason, proto.StartFailedPrefix) || !strings.Contains(r.LastExit.Reason, tc.want) {
				t.Errorf("registry = %+v, %v; want the last exit to say %q", r, rerr, tc.want)
			}
		})
	}
}
