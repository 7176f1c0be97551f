package systemtest_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// askPlan is a planner that asks the person a question (AskUserQuestion).
const askPlan = `
if-env LEGION_MODE=plan ask Which greeting should it use? | hello | hi
`

// TestDesktopNotificationAsUser: an ordinary user who set notify.desktop
// in the quick start's legion.toml is logged in, with a desktop's
// notification server on the session bus of the login (a stand-in that
// owns org.freedesktop.Notifications, as a desktop's does). The planner
// asks a question; the controller, a service of the user's manager,
// escalates it and shows it on that desktop: one Notify call on the real
// session bus, naming the team, the issue and what is asked.
func TestDesktopNotificationAsUser(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: askPlan})
	recv := filepath.Join(t.TempDir(), "notify-receiver")
	if out, err := exec.Command("go", "build", "-o", recv, "github.com/legion-dev/legion/internal/desktopnotify/desktoptest/receiver").CombinedOutput(); err != nil {
		t.Fatalf("build the notification receiver: %v\n%s", err, out)
	}
	if err := s.Install(recv, "/usr/local/bin/notify-receiver"); err != nil {
		t.Fatal(err)
	}
	id := s.setUpTeam()
	s.login("sh", "-ec", `printf '\n[teams.`+teamName+`.notify]\ndesktop = true\n' >> ~/.config/legion/legion.toml`)

	// One login: the desktop's server on its bus, then the controller.
	out := s.login("sh", "-ec", `notify-receiver -n 1 -timeout 3m > ~/shown.json &
r=$!
sleep 1
systemctl --user start legion@`+teamName+`
wait $r
cat ~/shown.json`)
	var shown struct{ App, Summary, Body string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &shown); err != nil {
		t.Fatalf("the receiver printed %q: %v", out, err)
	}
	if shown.App != "Legion" || !strings.Contains(shown.Summary, teamName+" "+id) || !strings.Contains(shown.Summary, "asks a question") ||
		!strings.Contains(shown.Body, "Which greeting should it use?") {
		t.Errorf("shown on the desktop: %+v; want Legion's notification of %s %s's question", shown, teamName, id)
	}
	if is, err := s.issue(id); err != nil || !strings.Contains(strings.Join(is.Labels, ","), "user-input-needed") {
		t.Errorf("%s: %v, %v; want it escalated (user-input-needed)", id, is.Labels, err)
	}
}
