package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/notify/notifytest"
)

// TestUsageLimitTenIssues: a team of ten issues under legion@demo, all
// implementing at once, hits the model API's usage limit mid-phase (each
// agent's turn fails as Claude Code's does after its retries: StopFailure
// "rate_limit", no reset time). Legion pauses claude once for them all
// (the first backoff, a minute; an agent started once it ended, stopping
// at the limit too, starts the next pause), does not escalate or notify,
// then prompts the conversations to go on, two a tick, oldest first; each
// finishes its phase where it stopped, and every issue reaches Done with
// no human action and nothing announced on the team's webhook.
func TestUsageLimitTenIssues(t *testing.T) {
	script := planScript + `
if-env LEGION_MODE=implement once work 300ms
if-env LEGION_MODE=implement once apierror rate_limit
if-env LEGION_MODE=implement once run sh -c "echo impl $LEGION_ISSUE > $LEGION_ISSUE.txt"
if-env LEGION_MODE=implement once run git add -A
if-env LEGION_MODE=implement once run git commit -qm "implement $LEGION_ISSUE"
` + implementDone + approveScript + retroFinishScript
	hook := notifytest.NewWebhook(t, "whsec-limits")
	secret := t.TempDir() + "/webhook-secret"
	if err := os.WriteFile(secret, []byte("whsec-limits\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// agent.memory_max: ten agents fit in the room the controller reckons.
	e := start(t, script, teamOptions{wipLimit: 10, extra: fmt.Sprintf("agent.memory_max = \"256M\"\nnotify.webhook_url = %q\nnotify.webhook_secret_file = %q\n", hook.URL, secret)})
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var ids []string
	for i := range 10 {
		ids = append(ids, e.addIssue(ctx, fmt.Sprintf("Write file %d", i+1)))
	}
	e.startController()

	// The limit: implementers stop at it, claude pauses, and the issues
	// of stopped agents wait it out (not escalated).
	e.poll(ctx, "claude paused, an implementer waiting it out", func() (bool, string) {
		var rep controller.Report
		if err := json.Unmarshal([]byte(e.legion(ctx, "state", teamName, "--json")), &rep); err != nil {
			return false, err.Error()
		}
		if p := rep.Pauses["claude"]; p == nil || !p.Paused(time.Now()) {
			return false, "claude not paused"
		}
		for _, is := range rep.Issues {
			if is.Worker != nil && is.Worker.Mode == controller.ModeImplement && strings.Contains(is.Decision.Reason, "paused until") {
				return true, ""
			}
		}
		return false, "no implementer waiting out the pause yet"
	})

	// Then everything finishes by itself.
	for _, id := range ids {
		// Done comes a moment before the finisher's merge is in main.
		e.poll(ctx, id+" merged into main", func() (bool, string) {
			out, err := exec.Command("git", "-C", e.ws, "show", "main:"+id+".txt").CombinedOutput()
			return err == nil, string(out)
		})
		e.assertFinished(ctx, id, id+".txt", "impl "+id)
	}
	for _, id := range ids {
		is := e.issue(ctx, id)
		if c := legionComments(is); len(c) != 0 {
			t.Errorf("%s: Legion escalated %q; want no human action", id, c)
		}
		text, _ := e.sessionFile(id, controller.ModeImplement)
		if n := strings.Count(text, controller.ResumePrompt); n != 1 {
			t.Errorf("%s's implementer was prompted to go on %d times; want once", id, n)
		}
	}
	var pauses map[string]*controller.Pause
	if err := json.Unmarshal([]byte(e.legion(ctx, "limits", "show", teamName, "--json")), &pauses); err != nil {
		t.Fatal(err)
	}
	// Each implementer stopped once; agents that stopped while paused
	// shared the pause; one started after a pause ended starts the next.
	if p := pauses["claude"]; p == nil || len(p.Hits) != 10 || p.Pauses < 1 || p.Pauses > 4 {
		t.Errorf("claude's pauses: %+v; want 10 limits seen in at most 4 pauses", p)
	} else {
		t.Logf("10 limits in %d pauses, %s waited", p.Pauses, p.Waited)
	}
	if d := hook.Deliveries(); len(d) != 0 {
		t.Errorf("the webhook got %d messages (%+v); want none: nothing waited for a person", len(d), d)
	}
	if r := hook.Rejected(); len(r) != 0 {
		t.Errorf("the webhook rejected %v", r)
	}
}
