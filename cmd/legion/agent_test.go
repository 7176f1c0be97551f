package main

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/ptyworker/claude"
)

// TestScriptedAgentCmd runs the hidden command in-process with Claude's
// flags, which cobra must pass through untouched.
func TestScriptedAgentCmd(t *testing.T) {
	sandboxXDG(t)
	cwd := t.TempDir()
	t.Chdir(cwd)
	t.Setenv("LEGION_SCRIPT", "say hi from $LEGION_MODE\nexit 0")
	t.Setenv("LEGION_MODE", "plan")
	id := uuid.New()

	cmd := newScriptedAgentCmd(&globals{})
	cmd.SetArgs([]string{"--dangerously-skip-permissions", "--session-id", id.String(), "the prompt"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("scripted-agent: %v", err)
	}
	physical, err := syscall.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(claude.SessionFile(os.Getenv("HOME"), physical, id))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "hi from plan") {
		t.Errorf("session file lacks the said text:\n%s", data)
	}

	cmd = newScriptedAgentCmd(&globals{})
	cmd.SetArgs([]string{"--help"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Errorf("scripted-agent --help: %v", err)
	}
}
