package web

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// sessionBrowser starts Debian's chromium headless (the flags of WEB.md) for
// the test and returns a tab's context; cleanup ends the browser.
func sessionBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	sdtest.Require(t, "chromium (apt-get install chromium; scripts/check-deps installs it)", err == nil)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 1000),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// sessionArtifacts is where screenshots go: $LEGION_TEST_ARTIFACTS, else the
// test's temp dir.
func sessionArtifacts(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("LEGION_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// issueSession makes a configured team "web" with an issue In Progress
// (WEB-1, in its local tracker) whose branch a merge would conflict with,
// and starts the scripted agent as that issue's implementer. It returns
// the session's name.
func (f *helperFixture) issueSession(t *testing.T) string {
	t.Helper()
	for _, kv := range []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	repo := filepath.Join(f.m.Home, "src", "web")
	if err := os.MkdirAll(repo, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(dir, text string) {
		if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, repo, "init", "-q", "-b", "main")
	write(repo, "title = Legion\ncolour = blue\n")
	git(t, repo, "add", "app.txt")
	git(t, repo, "commit", "-q", "-m", "first")
	tm, err := config.AddTeam(f.cfg, "web", repo, "")
	if err != nil {
		t.Fatal(err)
	}
	state, err := config.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	parts, err := team.Open(tm, f.cfg, state)
	if err != nil {
		t.Fatal(err)
	}
	tracker, ok := parts.Tracker.(*local.Store)
	if !ok {
		t.Fatalf("team web's tracker is %T; want the local one", parts.Tracker)
	}
	is, err := tracker.Add(t.Context(), "Make it green")
	if err != nil {
		t.Fatal(err)
	}
	if is.ID != "WEB-1" {
		t.Fatalf("the tracker's first issue is %s; want WEB-1", is.ID)
	}
	if err := parts.Tracker.Move(t.Context(), is.ID, controller.StatusInProgress); err != nil {
		t.Fatal(err)
	}
	wt, err := parts.Worktrees.Ensure(t.Context(), "WEB-1")
	if err != nil {
		t.Fatal(err)
	}
	write(wt.Path, "title = Legion\ncolour = green\n")
	git(t, wt.Path, "commit", "-q", "-am", "WEB-1: green")
	write(repo, "title = Legion\ncolour = red\n")
	git(t, repo, "commit", "-q", "-am", "red")

	const name = "WEB-1-implement"
	ctx, cancel := context.WithTimeout(t.Context(), termWait)
	defer cancel()
	_, err = f.c.Spawn(ctx, api.SpawnArgs{
		Team: tm.Name, TeamID: tm.ID.String(), Issue: "WEB-1",
		Name: name, ID: uuid.NewSHA1(tm.ID, []byte(name)).String(),
		Mode: "implement", Role: "worker", Cwd: wt.Path,
		Argv:               []string{f.bin, "scripted-agent", "hello"},
		Env:                []string{"LEGION_SCRIPT=say Got it: $PROMPT"},
		Cooldown:           new(api.Duration(0)),
		StartLimitBurst:    5,
		StartLimitInterval: api.Duration(10 * time.Minute),
		RingSize:           1 << 20,
	})
	if err != nil {
		t.Fatalf("spawn %s: %v", name, err)
	}
	waitfor.Check(t, termWait, "the agent's first answer", func() error {
		if !strings.Contains(f.transcript(t, name), "Got it: hello") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	return name
}

// TestSessionViewInBrowser: in a real headless Chromium, the Session view
// of an issue's session (reached from the issue's card on the board, and
// by URL, #/session/NAME) shows the
// agent's screen in the terminal, its resources, transcript and the
// issue's diff with the would-be conflict marked; keys typed before "Take
// control" do not reach the agent, keys typed after it do (the agent
// answers, and its transcript has the one and not the other). A
// screenshot of the view goes to the artifact dir.
func TestSessionViewInBrowser(t *testing.T) {
	f := startHelper(t)
	name := f.issueSession(t)
	ctx := sessionBrowser(t)
	ctx, cancel := context.WithTimeout(ctx, 3*termWait)
	defer cancel()

	termText := `(document.querySelector("#terminal .xterm-rows") || {}).textContent || ""`
	// typeLine types text into the focused terminal as a person's
	// keyboard would reach xterm.js (Input.insertText: one input event;
	// synthesised key-down and char events would each type the key),
	// then presses Enter (a key down and up, without the char event that
	// would be a second Enter).
	typeLine := func(text string) chromedp.Action[chromedp.Void] {
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
	waitText := func(what, expr, want string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			return waitfor.Until(termWait, what, func() error {
				got, err := chromedp.Evaluate[string](expr)(ctx, tg)
				if err != nil {
					return err
				}
				if !strings.Contains(got, want) {
					return fmt.Errorf("%q lacks %q", got, want)
				}
				return nil
			})
		})
	}
	shots := sessionArtifacts(t)
	// shoot saves a screenshot of the whole page as file in shots.
	shoot := func(file string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			p := filepath.Join(shots, file)
			t.Logf("screenshot: %s", p)
			return os.WriteFile(p, png, 0o644)
		})
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/login#t="+testToken),
		chromedp.WaitVisible(chromedp.CSS(`body[data-state="ready"]`)),
		// From the board: the issue's card links its session.
		chromedp.Navigate(f.url+"/#board"),
		chromedp.Click(chromedp.CSS(`.card[data-issue="WEB-1"] a.session`)),
		waitText("the board's link to open the Session view", `location.hash`, "#session/"+name),
		waitText("the view to show the session", `document.querySelector(".session-name").textContent`, name),
		// By URL.
		chromedp.Navigate(f.url+"/#/session/"+name),
		waitText("the terminal to show the agent's screen", termText, "Got it: hello"),
		waitText("the resources", `document.querySelector("#resources").textContent`, "Memory"),
		waitText("the transcript", `document.querySelector("#transcript").textContent`, "Got it: hello"),
		chromedp.WaitVisible(chromedp.CSS(`#take-control`)),
		shoot("session-view-readonly.png"),
		// Typed while read-only: not sent.
		chromedp.Click(chromedp.CSS(`#terminal`)),
		chromedp.Focus(chromedp.CSS(`#terminal .xterm-helper-textarea`)),
		typeLine("before"),
		waitText("the read-only hint", `document.querySelector("#term-state").textContent`, "read-only"),
		chromedp.Click(chromedp.CSS(`#take-control`)),
		waitText("control", `document.querySelector("#term-state").textContent`, "in control"),
		chromedp.Focus(chromedp.CSS(`#terminal .xterm-helper-textarea`)),
		typeLine("after"),
		waitText("the agent's answer to the typed line", termText, "Got it: after"),
	)
	if err != nil {
		t.Fatalf("session view: %v", err)
	}
	var tr string
	waitfor.Check(t, termWait, "the agent's transcript to show the answer", func() error {
		if tr = f.transcript(t, name); !strings.Contains(tr, "Got it: after") {
			return fmt.Errorf("transcript %q", tr)
		}
		return nil
	})
	if strings.Contains(tr, "before") {
		t.Errorf("the agent got keys typed before Take control: transcript %q", tr)
	}

	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`.panel-tabs button[data-panel="diff"]`)),
		waitText("the diff's conflict", `document.querySelector("#diff").textContent`, "would conflict in 1 file"),
		waitText("the patch", `(document.querySelector("#diff .patch") || {}).textContent || ""`, "+colour = green"),
		shoot("session-view.png"),
	)
	if err != nil {
		t.Fatalf("diff panel: %v", err)
	}
}
