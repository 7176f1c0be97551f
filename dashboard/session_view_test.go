package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/dashboard/webtest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// sessionScript is the planner of TestSessionViewInBrowser: it answers
// every prompt, the plan's and each line typed at it, and never says
// worker-done, so the session stays at its prompt.
const sessionScript = "say Got it: $PROMPT_TITLE\n"

// typeLine types text into the focused terminal as a keyboard reaches
// xterm.js (Input.insertText: one input event; synthesised key-down and
// char events would each type the key), then presses Enter (a key down
// and up, without the char event that would be a second Enter).
func typeLine(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: text}); err != nil {
			return err
		}
		enter := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeRawKeyDown, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}
		if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, enter); err != nil {
			return err
		}
		enter.Type = input.DispatchKeyEventTypeKeyUp
		_, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, enter)
		return err
	})
}

// gitIn runs real git in dir.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// transcript is a session's whole transcript as the helper has it.
func transcript(t *testing.T, name string) string {
	t.Helper()
	c, err := api.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	if _, err := c.Logs(t.Context(), api.LogsArgs{Name: name}, &b); err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return b.String()
}

// TestSessionViewInBrowser: in a real headless Chromium against the real
// helper under a private manager, the demo team's controller works on
// DEMO-1 with the scripted agent; the Session view of its planner,
// reached from the issue's card on the board and by URL (#/session/NAME),
// shows the agent's screen in the terminal, its resources and
// transcript, and the issue's diff with the would-be conflict marked
// (the branch and main change the same line). Keys typed before "Take
// control" do not reach the agent; keys typed after it do (the agent
// answers them, and its transcript has the one and not the other).
// Screenshots of the view, read-only and in control, go to the artifact
// dir.
func TestSessionViewInBrowser(t *testing.T) {
	f := webtest.Start(t, webtest.Options{Script: sessionScript, Issues: []string{"Make it green"}})
	b := webtest.NewBrowser(t)
	b.Navigate(f.LoginURL())
	b.WaitJS("the page to log in", `document.body.dataset.state === "ready"`)
	f.StartController()

	// The planner runs and has answered its prompt.
	id := f.Issues[0]
	var name string
	waitfor.Check(t, webtest.WaitFor, "the planner of "+id+" to answer its prompt", func() error {
		ss, _ := f.Server.Sessions()
		for _, s := range ss {
			if s.Issue == id && s.State == api.StateRunning {
				name = s.Name
			}
		}
		if name == "" {
			return fmt.Errorf("no running session of %s in %+v", id, ss)
		}
		if tr := transcript(t, name); !strings.Contains(tr, "turn ended") {
			return fmt.Errorf("transcript %q", tr)
		}
		return nil
	})
	// The branch and main change the same line.
	wt := f.Team.Worktrees.Path(id)
	if err := os.WriteFile(filepath.Join(wt, "README.md"), []byte("# demo\ncolour = green\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gitIn(t, wt, "commit", "-q", "-am", id+": green")
	if err := os.WriteFile(filepath.Join(f.Team.Workspace, "README.md"), []byte("# demo\ncolour = red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gitIn(t, f.Team.Workspace, "commit", "-q", "-am", "red")

	term := `(document.querySelector("#terminal .xterm-rows") || {}).textContent || ""`
	state := `document.querySelector("#term-state").textContent`
	has := func(expr, want string) string { return fmt.Sprintf("(%s).includes(%q)", expr, want) }

	// A board fetch that ends after the user moved on to the Session view
	// leaves the Session view on the page: the board's fetch is held until
	// the Session view is shown, then let go.
	b.Navigate(f.URL + "/#board")
	b.WaitJS("the board", `document.querySelector('.card[data-issue="`+id+`"] a.session')`)
	hold := `(() => {
		const api = window.realAPI = Legion.ctx.api;
		Legion.ctx.api = (path, init) => path.startsWith("/api/board")
			? new Promise((go) => { window.letBoardGo = go; }).then(() => api(path, init)).then((v) => { window.boardFetched = true; return v; })
			: api(path, init);
		location.hash = "#timeline";
		location.hash = "#board";
	})()`
	if err := b.Eval(hold, nil); err != nil {
		t.Fatal(err)
	}
	b.WaitJS("the board's fetch to be held", `window.letBoardGo`)
	if err := b.Eval(`location.hash = "#session/`+name+`"`, nil); err != nil {
		t.Fatal(err)
	}
	b.WaitJS("the Session view of "+name+" while the board's fetch is held", has(`(document.querySelector(".session-name") || {}).textContent || ""`, name))
	if err := b.Eval(`Legion.ctx.api = window.realAPI; window.letBoardGo()`, nil); err != nil {
		t.Fatal(err)
	}
	b.WaitJS("the held board fetch to end", `window.boardFetched`)
	var shown struct {
		Session bool
		Board   bool
	}
	if err := b.Eval(`({session: !!document.querySelector(".session-name"), board: !!document.querySelector("#view .board")})`, &shown); err != nil {
		t.Fatal(err)
	}
	if !shown.Session || shown.Board {
		t.Errorf("after a board fetch that ended on the Session view: Session view shown %v, board shown %v; want the Session view only", shown.Session, shown.Board)
	}

	// From the board: the issue's card links its session.
	b.Navigate(f.URL + "/#board")
	if err := b.Do(chromedp.Click(chromedp.CSS(`.card[data-issue="` + id + `"] a.session`))); err != nil {
		t.Fatalf("click the session of %s on the board: %v", id, err)
	}
	b.WaitJS("the Session view of "+name, has(`location.hash`, "#session/"+name)+" && "+has(`document.querySelector(".session-name").textContent`, name))
	// By URL.
	b.Navigate(f.URL + "/#/session/" + name)
	b.WaitJS("the terminal to show the agent's screen", has(term, "Got it:"))
	b.WaitJS("the resources", has(`document.querySelector("#resources").textContent`, "Memory"))
	b.WaitJS("the transcript", has(`document.querySelector("#transcript").textContent`, "turn ended"))
	b.WaitJS("the read-only state", has(state, "read-only"))
	b.Screenshot("session-view-readonly")

	// Typed while read-only: not sent.
	err := b.Do(
		chromedp.Click(chromedp.CSS(`#terminal`)),
		chromedp.Focus(chromedp.CSS(`#terminal .xterm-helper-textarea`)),
		typeLine("before"),
	)
	if err != nil {
		t.Fatalf("type before taking control: %v", err)
	}
	b.WaitJS("the read-only hint", has(state, "press Take control"))
	if err := b.Do(chromedp.Click(chromedp.CSS(`#take-control`))); err != nil {
		t.Fatalf("click Take control: %v", err)
	}
	b.WaitJS("control", has(state, "in control"))
	if err := b.Do(chromedp.Focus(chromedp.CSS(`#terminal .xterm-helper-textarea`)), typeLine("after")); err != nil {
		t.Fatalf("type after taking control: %v", err)
	}
	b.WaitJS("the agent's answer to the typed line", has(term, "Got it: after"))

	// The worker's side: the agent got "after" and never "before" (input
	// is delivered in order, so "before" would have come first).
	var tr string
	waitfor.Check(t, webtest.WaitFor, "the transcript to show the answer to after", func() error {
		if tr = transcript(t, name); !strings.Contains(tr, "Got it: after") {
			return fmt.Errorf("transcript %q", tr)
		}
		return nil
	})
	if strings.Contains(tr, "before") {
		t.Errorf("the agent got keys typed before Take control: transcript %q", tr)
	}

	if err := b.Do(chromedp.Click(chromedp.CSS(`.panel-tabs button[data-panel="diff"]`))); err != nil {
		t.Fatal(err)
	}
	b.WaitJS("the diff's would-be conflict", has(`document.querySelector("#diff").textContent`, "would conflict in 1 file"))
	b.WaitJS("the conflict's markers", has(`document.querySelector("#conflicts").textContent`, "<<<<<<< main"))
	b.WaitJS("the patch", has(`(document.querySelector("#diff .patch") || {}).textContent || ""`, "+colour = green"))
	b.Screenshot("session-view")

	// What the agent was told: the planner's instructions for this issue.
	if err := b.Do(chromedp.Click(chromedp.CSS(`.panel-tabs button[data-panel="instructions"]`))); err != nil {
		t.Fatal(err)
	}
	b.WaitJS("the planner's instructions", has(`document.querySelector("#instructions").textContent`, "# Legion: plan "+id+" (team "))
}
