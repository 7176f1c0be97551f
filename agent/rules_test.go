package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/legion-dev/legion/config"
)

// TestAllowRulesPhysicalWorktree: a worktree reached through a symlink is
// allowed by both its paths (Claude Code resolves its working directory).
func TestAllowRulesPhysicalWorktree(t *testing.T) {
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "wt")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	rules, err := AllowRules(config.PermissionsAllowlist, "legion", link, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Edit(/" + link + "/**)", "Edit(/" + Physical(target) + "/**)", "Bash(legion issue:*)"} {
		if !slices.Contains(rules, want) {
			t.Errorf("AllowRules(%s) = %q; want %q among them", link, rules, want)
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r != "Bash(legion issue:*)" })); n != 1 {
		t.Errorf("AllowRules with legion by name = %q; want each rule once", rules)
	}
}
