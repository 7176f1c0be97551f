package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/dashboard"
	"github.com/legion-dev/legion/dashboard/webtest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// browserScript: DEMO-1's planner asks a question, DEMO-2's wants to run
// a command that needs permission, DEMO-3's ends its turn without
// worker-done, DEMO-4's turn fails at the API (a rate limit); each says
// what it got, so its session file shows it.
const browserScript = `
if-env LEGION_ISSUE=DEMO-1 if-env LEGION_MODE=plan once ask Which database? | Postgres | SQLite
if-env LEGION_ISSUE=DEMO-1 if-env LEGION_MODE=plan once say chose $ANSWER
if-env LEGION_ISSUE=DEMO-2 if-env LEGION_MODE=plan once bash touch approved.txt
if-env LEGION_ISSUE=DEMO-2 if-env LEGION_MODE=plan once say ran it
if-env LEGION_ISSUE=DEMO-3 if-env LEGION_MODE=plan once say I planned half of it; shall I go on?
if-env LEGION_ISSUE=DEMO-4 if-env LEGION_MODE=plan once apierror rate_limit
if-prompt go-on say going on with $PROMPT
`

// waitNeed waits until the dashboard's queue lists a need of kind for
// issue.
func waitNeed(t *testing.T, f *webtest.Fixture, issue, kind string) {
	t.Helper()
	waitNeedThat(t, f, issue+" needs a "+kind, func(n dashboard.Need) bool { return n.Issue == issue && n.Kind == kind })
}

// waitNeedThat waits until the dashboard's queue lists a need for which
// ok is true.
func waitNeedThat(t *testing.T, f *webtest.Fixture, what string, ok func(dashboard.Need) bool) {
	t.Helper()
	waitfor.Check(t, webtest.WaitFor, what, func() error {
		req, _ := http.NewRequest("GET", f.URL+"/api/needs", nil)
		req.Header.Set("Authorization", "Bearer "+f.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var nr dashboard.NeedsResult
		if err := json.NewDecoder(res.Body).Decode(&nr); err != nil {
			return fmt.Errorf("GET /api/needs: %d: %w", res.StatusCode, err)
		}
		for _, n := range nr.Needs {
			if ok(n) {
				return nil
			}
		}
		return fmt.Errorf("needs %+v, errors %v", nr.Needs, nr.Errors)
	})
}

// waitSessionFile waits until the planner's session file of issue shows
// want.
func waitSessionFile(t *testing.T, f *webtest.Fixture, issue, want string) {
	t.Helper()
	id := claudecode.SessionID(f.Team.ID, issue, "plan").String()
	waitfor.Check(t, webtest.WaitFor, issue+"'s session file shows "+want, func() error {
		files, _ := filepath.Glob(filepath.Join(f.SD.Home, ".claude", "projects", "*", id+".jsonl"))
		if len(files) != 1 {
			return fmt.Errorf("session files %v", files)
		}
		b, _ := os.ReadFile(files[0])
		if !strings.Contains(string(b), want) {
			return fmt.Errorf("no %q in %s", want, files[0])
		}
		return nil
	})
}

// goTo shows the view of hash h (a same-document navigation: no load to
// wait for).
func goTo(t *testing.T, b *webtest.Browser, h string) {
	t.Helper()
	if err := b.Eval("location.hash = "+strconv.Quote(h), nil); err != nil {
		t.Fatal(err)
	}
}

// TestNeedsInBrowser: in a real headless Chromium, the Needs-you page
// shows every wait of the demo team live; a choice clicked reaches the
// agent (its session file shows the answer) and Approve lets the command
// run. Screenshots of the Needs-you and Timeline views go to the artifact
// dir.
func TestNeedsInBrowser(t *testing.T) {
	f := webtest.Start(t, webtest.Options{Script: browserScript, WIPLimit: 6, Issues: []string{"Pick a database", "Touch a file", "Plan half", "Hit the rate limit"}})
	b := webtest.NewBrowser(t)
	b.Navigate(f.LoginURL())
	b.WaitJS("the page logged in", `document.body.dataset.state === "ready"`)
	goTo(t, b, "#needs")
	// The page is open before anything waits: what follows comes live.
	f.StartController()
	waitNeed(t, f, "DEMO-1", dashboard.NeedQuestion)
	waitNeed(t, f, "DEMO-2", dashboard.NeedPermission)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := b.Do(actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("every wait shown",
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-1"][data-kind="question"] button.choice[data-choice="SQLite"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-2"][data-kind="permission"] button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-3"][data-kind="turn"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-4"][data-kind="rate_limit"]`)))
	if got := b.Text(`section.need[data-issue="DEMO-2"] pre.command`); got != "touch approved.txt" {
		t.Errorf("the permission's command on the page = %q; want touch approved.txt", got)
	}
	b.Screenshot("needs")
	// A card stays the element it is while what it shows is the same: the
	// controller's escalation of DEMO-2's wait (the tracker's label, which
	// the card does not show) must not replace it, or a click in progress
	// lands on a removed button. (This checks it when the escalation comes
	// after the card was drawn, as it mostly does.)
	const probe = `document.querySelector('section.need[data-issue="DEMO-2"][data-kind="permission"]')`
	if err := b.Eval(probe+`.dataset.probe = "kept"`, nil); err != nil {
		t.Fatal(err)
	}
	waitNeedThat(t, f, "DEMO-2's permission escalated", func(n dashboard.Need) bool {
		return n.Issue == "DEMO-2" && n.Kind == dashboard.NeedPermission && n.Escalated
	})

	do("pick SQLite", chromedp.Click(chromedp.CSS(`section.need[data-issue="DEMO-1"] button.choice[data-choice="SQLite"]`)))
	waitSessionFile(t, f, "DEMO-1", "chose SQLite")
	// The answered question is gone from a queue read after the escalation.
	do("the answered question gone", chromedp.WaitNotPresent(chromedp.CSS(`section.need[data-issue="DEMO-1"][data-kind="question"]`)))
	var kept string
	if err := b.Eval(probe+`.dataset.probe || ""`, &kept); err != nil || kept != "kept" {
		t.Errorf("DEMO-2's card after its escalation: probe %q, %v; want the same element (probe \"kept\")", kept, err)
	}

	do("approve the command", chromedp.Click(chromedp.CSS(`section.need[data-issue="DEMO-2"] button.approve`)))
	waitSessionFile(t, f, "DEMO-2", "ran it")
	if _, err := os.Stat(filepath.Join(f.Team.Worktrees.Path("DEMO-2"), "approved.txt")); err != nil {
		t.Errorf("the command approved in the page did not run: %v", err)
	}
	// The queue follows live: the planner that chose now waits with its
	// ended turn.
	do("the queue updated live", chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-1"][data-kind="turn"]`)))

	// A notification's link (#needs/TEAM/ISSUE) marks its card.
	goTo(t, b, "#needs/demo/DEMO-4")
	do("the linked card marked", chromedp.WaitVisible(chromedp.CSS(`section.need.linked[data-team="demo"][data-issue="DEMO-4"]`)))

	goTo(t, b, "#timeline/demo/1")
	// No journal here: the states come from what the dashboard saw.
	do("the timeline drawn",
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline g.issue[data-issue="DEMO-1"] rect.phase`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline g.issue[data-issue="DEMO-1"] rect.activity[data-state="waiting_answer"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline g.issue[data-issue="DEMO-2"] rect.activity[data-state="waiting_permission"]`)))
	b.Screenshot("timeline")
}
