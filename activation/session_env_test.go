package activation

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
)

// TestRetroLegionSession: a retro resumes the implementer's conversation
// under a worker of its own. LEGION_SESSION means the conversation's ID
// everywhere: the agent's environment, the unit's environment and journal
// fields, and the helper's log all carry the session ID the agent was
// started with.
func TestRetroLegionSession(t *testing.T) {
	e := startEnv(t)
	ctx := t.Context()
	ws := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"commit", "-q", "--allow-empty", "-m", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", ws, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", args[0], err, out)
		}
	}
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "legion.toml")
	e.mustLegion(ctx, "team", "add", "demo", "--workspace", ws)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("agent.kind = \"custom\"\n") // a shell, not Claude Code: no --settings
	f.WriteString("agent.new = [\"/bin/sh\", \"-c\", \"echo argv={session_id} env=$LEGION_SESSION; exec sleep 600\", \"agent\"]\n")
	f.WriteString("agent.resume = [\"/bin/sh\", \"-c\", \"echo argv={session_id} env=$LEGION_SESSION; exec sleep 600\", \"agent\"]\n")
	f.Close()

	c := e.client(ctx)
	var res api.SpawnResult
	out := e.mustLegion(ctx, "dispatch", "demo", "DEMO-1", "retro", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dispatch --json printed %q: %v", out, err)
	}
	// The agent's line, not the transcript's marker quoting its argv.
	line := regexp.MustCompile(`argv=(\S+) env=([^$\s]*)\r?\n`)
	var argvID, envID string
	e.poll(ctx, "the retro agent prints its session IDs", func() (bool, string) {
		var out strings.Builder
		c.Logs(ctx, api.LogsArgs{Name: res.Name}, &out)
		m := line.FindStringSubmatch(out.String())
		if m == nil {
			return false, out.String()
		}
		argvID, envID = m[1], m[2]
		return true, ""
	})
	if argvID == res.ID {
		t.Fatalf("the retro agent was started with session %s, its worker's own ID; want the implementer's", argvID)
	}
	if envID != argvID {
		t.Errorf("agent's LEGION_SESSION = %q; want %q, the session it was started with", envID, argvID)
	}
	for _, prop := range []string{"Environment"} {
		out, err := exec.CommandContext(ctx, "systemctl", "--user", "show", "--value", "-p", prop, res.Unit).Output()
		if err != nil {
			t.Fatalf("systemctl --user show -p %s %s: %v", prop, res.Unit, err)
		}
		if want := "LEGION_SESSION=" + argvID; !strings.Contains(string(out), want) {
			t.Errorf("unit %s: %s = %q; want it to hold %s", res.Unit, prop, out, want)
		}
	}
	// The helper's entry for the spawn the dispatch sent; under the
	// journal its "session" attribute is the LEGION_SESSION field.
	logged := regexp.MustCompile(`msg=spawn .*\bsession=(\S+) name=` + regexp.QuoteMeta(res.Name) + ` `)
	b, err := os.ReadFile(e.helperLog)
	if err != nil {
		t.Fatal(err)
	}
	m := logged.FindSubmatch(b)
	if m == nil {
		t.Fatalf("helper log %s has no spawn entry of %s", e.helperLog, res.Name)
	}
	if string(m[1]) != argvID {
		t.Errorf("helper logged the spawn with session=%s; want %s, the agent's session", m[1], argvID)
	}
}
