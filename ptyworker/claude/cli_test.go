package claude

import (
	"os"
	"strings"
	"testing"
)

// TestCLIVersionMatchesInstaller: the version the code is checked against
// is the one scripts/install-claude-code installs.
func TestCLIVersionMatchesInstaller(t *testing.T) {
	b, err := os.ReadFile("../../scripts/install-claude-code")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nVERSION=" + CLIVersion + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("scripts/install-claude-code has no line %q: keep it and CLIVersion in step", strings.TrimSpace(want))
	}
}
