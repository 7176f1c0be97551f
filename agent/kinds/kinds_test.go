package kinds

import (
	"strings"
	"testing"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/config"
)

// TestFor: every kind is found by its name ("" is claude), and an unknown
// kind is an error naming it and the known ones.
func TestFor(t *testing.T) {
	for _, k := range All() {
		got, err := For(config.Agent{Kind: config.AgentKind(k.Name())})
		if err != nil || got.Name() != k.Name() {
			t.Errorf("For(%q) = %v, %v; want that kind", k.Name(), got, err)
		}
	}
	if k, err := For(config.Agent{}); err != nil || k.Name() != string(config.AgentClaude) {
		t.Errorf("For(no kind) = %v, %v; want claude", k, err)
	}
	_, err := For(config.Agent{Kind: "aider"})
	if err == nil || !strings.Contains(err.Error(), `"aider"`) || !strings.Contains(err.Error(), `"opencode"`) {
		t.Errorf("For(kind aider) = %v; want an error naming it and the known kinds", err)
	}
}

// TestPinned: every kind with a CLI of its own has its version pin, and
// every pin is a kind here.
func TestPinned(t *testing.T) {
	names := map[string]bool{}
	for _, k := range All() {
		names[k.Name()] = true
		if _, ok := cliversion.For(k.Name()); !ok && k.Name() != string(config.AgentCustom) {
			t.Errorf("kind %s has no pin in agent/cliversion", k.Name())
		}
	}
	for _, c := range cliversion.All() {
		if !names[c.Kind] {
			t.Errorf("agent/cliversion pins %s, which is no kind in the registry", c.Kind)
		}
	}
}
