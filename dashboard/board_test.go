package dashboard_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/contrib/demo"
	"github.com/legion-dev/legion/dashboard/webtest"
)

// columnJS counts the cards of the board's column for status.
func columnJS(status string) string {
	return fmt.Sprintf(`document.querySelectorAll('.column[data-status=%q] .card').length`, status)
}

// TestBoardInBrowser: a real Chromium logs in by the login URL, sees the
// demo team's three issues in Todo, sees session changes arrive over the
// event socket while the controller runs them, and sees every issue move
// to Done, each card with its agents' tokens against the team's budget
// per issue and the board with the team's spend today against its daily
// budget. Screenshots of each view are kept (see webtest.ArtifactDir).
func TestBoardInBrowser(t *testing.T) {
	f := webtest.Start(t, webtest.Options{Issues: demo.Issues, TrackerRefresh: 2 * time.Second,
		TeamTOML: "budget.issue_tokens = 1_000_000_000\nbudget.day_tokens = 2_000_000_000\n"})
	b := webtest.NewBrowser(t)

	b.Navigate(f.LoginURL())
	b.WaitJS("the board loaded", `document.body.dataset.state === "ready" && document.querySelector(".board")`)
	var href string
	if err := b.Eval("location.href", &href); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(href, f.Token) || strings.Contains(href, "t=") {
		t.Errorf("after the login the address is %s; want the token gone from it", href)
	}
	b.WaitJS("the event socket open", `document.body.dataset.events === "open"`)
	b.WaitJS("three issues in Todo", columnJS("Todo")+` === 3`)
	var ids []string
	if err := b.Eval(`[...document.querySelectorAll('.card')].map(c => c.dataset.issue)`, &ids); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f.Issues, ids); diff != "" {
		t.Errorf("cards (-want +got):\n%s", diff)
	}
	b.Screenshot("board-todo")

	// A session change reaches the open page: the controller dispatches,
	// the helper's sessions.watch tells the server, the server the page.
	var before float64
	if err := b.Eval(`Legion.lastEvent ? Legion.lastEvent.seq : 0`, &before); err != nil {
		t.Fatal(err)
	}
	f.StartController()
	b.WaitJS("a session event on the page", fmt.Sprintf(`Legion.lastEvent && Legion.lastEvent.seq > %v && document.querySelector('.card .session-line')`, before))
	b.WaitJS("an issue in progress with a live session", `document.querySelector('.column[data-status="In Progress"] .card .session-line') || document.querySelector('.column[data-status="Needs Review"] .card .session-line')`)
	b.Screenshot("board-working")

	b.WaitJS("every issue Done", columnJS("Done")+` === 3`)
	// The agents' tokens, summed from their session files.
	b.WaitJS("tokens on every Done card", `[...document.querySelectorAll('.column[data-status="Done"] .card')].every(c => /^[0-9,]+ tokens of 1,000,000,000/.test((c.querySelector('.usage') || {}).textContent || ""))`)
	b.WaitJS("the team's spend today", `/^today [0-9,]+ tokens of 2,000,000,000/.test((document.querySelector('.board-head .budget') || {}).textContent || "")`)
	b.Screenshot("board-done")
	for _, status := range []string{"Todo", "In Progress", "Needs Review", "Retro"} {
		var n int
		if err := b.Eval(columnJS(status), &n); err != nil || n != 0 {
			t.Errorf("column %s has %d cards (%v); want 0 once all are Done", status, n, err)
		}
	}

	// Every view, for the record.
	for _, view := range []string{"needs", "session", "timeline"} {
		b.Navigate(f.URL + "/#" + view)
		b.WaitJS(view+" shown", fmt.Sprintf(`document.getElementById("view").dataset.view === %q`, view))
		b.Screenshot("view-" + view)
	}
	if dir := os.Getenv("LEGION_DOCS_SCREENSHOTS"); dir != "" {
		for _, name := range []string{"board-working", "board-done"} {
			data, err := os.ReadFile(filepath.Join(webtest.ArtifactDir(t), name+".png"))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "dashboard-"+name+".png"), data, 0o644)
			}
			if err != nil {
				t.Errorf("copy %s to %s: %v", name, dir, err)
			}
		}
	}
}

// TestLoginNeededInBrowser: a browser without the token sees the page say
// so, and the API refused it.
func TestLoginNeededInBrowser(t *testing.T) {
	_, ts := newServer(t)
	b := webtest.NewBrowser(t)
	b.Navigate(ts.URL + "/")
	b.WaitJS("the login message", `document.getElementById("login-needed")`)
	if got := b.Text("#login-needed"); !strings.Contains(got, "Not logged in") {
		t.Errorf("the page says %q; want it to say it is not logged in", got)
	}
	b.Screenshot("login-needed")
	// A wrong token in the login URL is refused too.
	b.Navigate(ts.URL + "/login#t=wrong-token")
	b.WaitJS("the refusal", `document.getElementById("login-needed") && document.getElementById("login-needed").textContent.includes("wrong token")`)
}
