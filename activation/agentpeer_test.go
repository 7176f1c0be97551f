package activation

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/waitfor"
)

// TestAgentRefusedByHelper: a process in a dispatched session's worker
// unit (its agent, or what it runs) is refused by the helper with a reason;
// one in a `legion spawn` session (a person's command) is served.
func TestAgentRefusedByHelper(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := api.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	script := func(name string) []string {
		out := filepath.Join(dir, name)
		return []string{"/bin/sh", "-c", e.bin + " sessions list >" + out + ".out 2>" + out + ".err; echo $? >" + out + ".code"}
	}
	agent := testLaunch("X-1-implement", script("agent")...)
	agent.Mode, agent.Role, agent.Issue = "implement", roleWorker, "X-1"
	agent.ID = uuid.NewSHA1(config.AdhocTeamID, []byte("X-1:implement")).String()
	agent.Env = os.Environ()
	if _, err := c.Spawn(ctx, agent); err != nil {
		t.Fatalf("spawn the agent: %v", err)
	}
	person := testLaunch("by-hand", script("person")...)
	person.Env = os.Environ()
	if _, err := c.Spawn(ctx, person); err != nil {
		t.Fatalf("spawn the person's command: %v", err)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	for _, name := range []string{"agent", "person"} {
		if err := waitfor.Until(waitFor, name+"'s legion sessions list", func() error {
			if read(name+".code") == "" {
				return os.ErrNotExist
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if code, msg := read("agent.code"), read("agent.err"); code == "0" || !strings.Contains(msg, "runs in the worker unit") || !strings.Contains(msg, "may not use Legion's helper") {
		t.Errorf("the agent's legion sessions list: exit %s, stderr %q; want it refused, saying it runs in a worker unit", code, msg)
	}
	if code := read("person.code"); code != "0" {
		t.Errorf("the spawned command's legion sessions list: exit %s, stderr %q; want it served", code, read("person.err"))
	}
}
