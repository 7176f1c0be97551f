package service_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/notify/notifytest"
	"github.com/legion-dev/legion/internal/desktopnotify/desktoptest"
	"github.com/legion-dev/legion/units/unitname"
)

// TestQuestionNotifiedOnce: under a real user manager, legion@demo
// escalates the implementer's question and announces it once on each
// channel: a webhook receiver that verifies the signature (its secret
// from a 0600 file), an ntfy server wanting a token (from the manager's
// environment), and the desktop (a receiver of org.freedesktop.Notifications
// on the manager's session bus). A restart of the controller while the
// question waits sends nothing again, and the issue finishes once
// answered.
func TestQuestionNotifiedOnce(t *testing.T) {
	script := planScript + `
if-env LEGION_MODE=implement ask Which database? | Postgres | SQLite
if-env LEGION_MODE=implement run sh -c "echo db=$ANSWER > $LEGION_ISSUE.txt"
if-env LEGION_MODE=implement run git add -A
if-env LEGION_MODE=implement run git commit -qm "db for $LEGION_ISSUE"
` + implementDone + approveScript + retroFinishScript
	hook := notifytest.NewWebhook(t, "whsec-e2e")
	topic := notifytest.NewNtfy(t, "legion-e2e", "tk_e2e")
	secret := filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(secret, []byte("whsec-e2e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, script, teamOptions{wipLimit: 1, extra: fmt.Sprintf(
		"notify.webhook_url = %q\nnotify.webhook_secret_file = %q\nnotify.ntfy_url = %q\nnotify.ntfy_token_env = \"LEGION_E2E_NTFY\"\nnotify.desktop = true\n",
		hook.URL, secret, topic.URL)})
	if _, err := e.sd.Systemctl(t, "set-environment", "LEGION_E2E_NTFY=tk_e2e"); err != nil {
		t.Fatal(err)
	}
	desk := &desktoptest.Receiver{Caps: []string{"body"}}
	desk.Serve(t, e.sd.BusAddress)
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Pick a database")
	e.startController()

	e.poll(ctx, "the question announced on every channel", func() (bool, string) {
		h, n, d := len(hook.Deliveries()), len(topic.Messages()), len(desk.Shown())
		return h >= 1 && n >= 1 && d >= 1, fmt.Sprintf("webhook %d, ntfy %d, desktop %d; rejected %v", h, n, d, hook.Rejected())
	})
	// A restart returns once the new controller's first tick is done
	// (READY=1 follows it), and that tick has seen the question wait.
	ctl, _ := unitname.ControllerUnit(teamName)
	if _, err := e.sd.Systemctl(t, "restart", ctl); err != nil {
		t.Fatalf("restart %s: %v", ctl, err)
	}
	e.legion(ctx, "issue", "comment", "--author", "ana", teamName, id, "SQLite")
	e.legion(ctx, "issue", "label", teamName, id, controller.LabelFeedbackGiven)
	e.assertFinished(ctx, id, id+".txt", "db=SQLite")

	ds := hook.Deliveries()
	if len(ds) != 1 || len(topic.Messages()) != 1 || len(desk.Shown()) != 1 {
		t.Fatalf("webhook took %d, ntfy %d, desktop %d; want each exactly 1", len(ds), len(topic.Messages()), len(desk.Shown()))
	}
	w := ds[0].Message.Waits[0]
	if w.Issue != id || w.Kind != controller.WaitQuestion || !strings.Contains(w.Asked, "Which database?") ||
		!strings.HasSuffix(w.URL, "/#needs/"+teamName+"/"+id) {
		t.Errorf("announced %+v; want %s's question, linking to its card", w, id)
	}
	if s := desk.Shown()[0]; !strings.Contains(s.Summary, id) || !strings.Contains(s.Body, "Which database?") {
		t.Errorf("desktop showed %q / %q; want %s's question", s.Summary, s.Body, id)
	}
	if tags := topic.Messages()[0].Tags; !slices.Contains(tags, "question") {
		t.Errorf("ntfy tags %v; want question", tags)
	}
	log, err := os.ReadFile(e.logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "notify: sent") {
		t.Errorf("the log (%s) has no \"notify: sent\" line", e.logFile)
	}
	if strings.Contains(string(log), "whsec-e2e") || strings.Contains(string(log), "tk_e2e") {
		t.Errorf("the log (%s) holds a secret", e.logFile)
	}
}
