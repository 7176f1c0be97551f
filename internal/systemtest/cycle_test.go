package systemtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/contrib/demo"
	"github.com/legion-dev/legion/controller"
)

// TestIssueCycle: as an ordinary user with lingering, a team on the
// default agent kind (Claude Code, here the scripted agent behind
// `claude`) takes an issue from Todo to Done under the enabled
// legion@web; its journal tells the issue's story, and `legion logs`
// the same; `legion uninstall`
// leaves nothing of Legion's but its config and state.
func TestIssueCycle(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: demo.Script("legion")})
	s.login("legion", "team", "add", teamName, "--workspace", "src/web")
	before := s.homeFiles()
	s.login("legion", "install", "--enable", teamName)
	id := strings.TrimSpace(s.login("legion", "issue", "add", teamName, "Write a file"))
	if id != prefix+"-1" {
		t.Fatalf("legion issue add printed %q; want %s-1", id, prefix)
	}
	start := time.Now()
	s.login("systemctl", "--user", "start", "legion@"+teamName)
	s.waitStatus(id, controller.StatusDone)
	t.Logf("%s went from Todo to Done in %v", id, time.Since(start).Round(100*time.Millisecond))
	s.waitMerged(id)

	t.Run("journal", func(t *testing.T) { testIssueJournal(t, s, id) })
	t.Run("legion logs", func(t *testing.T) { testIssueLogs(t, s, id) })
	t.Run("uninstall", func(t *testing.T) { testUninstall(t, s, before) })
}
