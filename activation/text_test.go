package activation

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCLIText checks what people read: spawn prints the name, list a
// table and the recovery counts, status one field per line, and errors
// name what was wrong.
func TestCLIText(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	name := strings.TrimSpace(e.mustLegion(ctx, "spawn", "--", "sleep", "1000"))
	if !regexp.MustCompile(`^sleep-[0-9a-f]{4}$`).MatchString(name) {
		t.Errorf("spawn printed %q; want a generated name like sleep-1a2b", name)
	}
	out := e.mustLegion(ctx, "sessions", "list")
	for _, want := range []string{"NAME", "STATE", name, "running", "adhoc", "last recovery: 0 recovered, 0 pruned, 0 lost, 0 quarantined, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("sessions list lacks %q:\n%s", want, out)
		}
	}
	out = e.mustLegion(ctx, "sessions", "status", name)
	if !regexp.MustCompile(`(?m)^state:\s+running$`).MatchString(out) || !strings.Contains(out, "unit:") {
		t.Errorf("sessions status:\n%s", out)
	}
	e.stopHelper(ctx)
	if out := e.mustLegion(ctx, "sessions", "list"); !strings.Contains(out, "last recovery: 1 recovered, 0 pruned, 0 lost, 0 quarantined, 0 failed") {
		t.Errorf("sessions list after a helper restart lacks the counts:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"spawn", "--name", name, "--", "/bin/true"}, "already exists"},
		{[]string{"spawn", "--team", "nope", "--", "/bin/true"}, `unknown team "nope"`},
		{[]string{"spawn", "--", "no-such-program-x"}, `command "no-such-program-x" not found`},
		{[]string{"spawn", "--stale-after", "1m", "--", "/bin/true"}, "--stale-after needs --watch"},
		{[]string{"sessions", "kill", "nobody"}, `no session named "nobody"`},
		{[]string{"send", "nobody", "x"}, `no session named "nobody"`},
		{[]string{"sessions", "logs", "nobody"}, `no session named "nobody"`},
	} {
		_, stderr, err := e.legion(ctx, tc.args...)
		if !isExit(err) || !strings.Contains(stderr, tc.want) {
			t.Errorf("legion %s = %v, %q; want a failure saying %q", strings.Join(tc.args, " "), err, stderr, tc.want)
		}
	}
}
