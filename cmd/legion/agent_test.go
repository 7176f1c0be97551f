package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestScriptedAgentCmd runs the hidden command with Claude's flags, which
// cobra must pass through untouched. It is in a legion built with the demo
// tag only (as sdtest.LegionBinary builds it), so this runs that binary.
func TestScriptedAgentCmd(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	sandboxXDG(t)
	t.Chdir(t.TempDir())             // the agent's working directory: the child inherits it
	physical, err := syscall.Getwd() // what the agent sees, symlinks resolved
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LEGION_SCRIPT", "say hi from $LEGION_MODE\nexit 0")
	t.Setenv("LEGION_MODE", "plan")
	id := uuid.New()

	cmd := exec.CommandContext(t.Context(), bin, "scripted-agent", "--dangerously-skip-permissions", "--session-id", id.String(), "the prompt")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("legion scripted-agent: %v\n%s", err, out)
	}
	data, err := os.ReadFile(claudecode.SessionFile(os.Getenv("HOME"), physical, id))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "hi from plan") {
		t.Errorf("session file lacks the said text:\n%s", data)
	}

	if out, err := exec.CommandContext(t.Context(), bin, "scripted-agent", "--help").CombinedOutput(); err != nil {
		t.Errorf("legion scripted-agent --help: %v\n%s", err, out)
	}
}
