package web

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/legion-dev/legion/units/sdtest"
)

// startBrowser starts headless Chromium (Debian's chromium) with the
// dashboard tests' flags and a fresh profile, and returns a chromedp
// context for one tab; both end with the test.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	sdtest.Require(t, "chromium (apt-get install chromium; scripts/check-deps installs it)", err == nil)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// artifactDir is where screenshots go: $LEGION_TEST_ARTIFACTS, else the
// test's temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("LEGION_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// serve runs the dashboard (Run: the event hub too) on a loopback port
// until the test ends and returns its URL.
func (e *needsEnv) serve() string {
	e.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx, []net.Listener{l}) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("the dashboard's Run: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// hash moves the page to another view (a same-document navigation: no
// load to wait for).
func hash(h string) func(context.Context, *chromedp.Target) error {
	return func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any]("location.hash = "+strconv.Quote(h))(ctx, t)
		return err
	}
}

// TestNeedsInBrowser: in a real headless Chromium, the Needs-you page
// shows the planner's question with its options and the other planner's
// command; a choice clicked reaches the agent (its session file shows
// the answer) and Approve lets the command run. Screenshots of the
// Needs-you and Timeline views go to the artifact directory.
func TestNeedsInBrowser(t *testing.T) {
	e := startNeedsEnv(t, needsScript, false)
	url := e.serve()
	bctx := startBrowser(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e.addIssues(ctx, 4)
	e.startController("demo")
	e.need("DEMO-1", NeedQuestion)
	e.need("DEMO-2", NeedPermission)
	art := artifactDir(t)

	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, cancel := context.WithTimeout(bctx, needsWait)
		defer cancel()
		if err := chromedp.Do(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	screenshot := func(name string) {
		t.Helper()
		tctx, cancel := context.WithTimeout(bctx, needsWait)
		defer cancel()
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(art, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	run("log in and open Needs you",
		chromedp.Navigate(url+"/login#t="+e.srv.opts.Token),
		chromedp.WaitVisible(chromedp.CSS(`body[data-state="ready"]`)),
		chromedp.Func(hash("#needs")),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-1"][data-kind="question"] button.choice[data-choice="SQLite"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-2"][data-kind="permission"] button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-3"][data-kind="turn"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-4"][data-kind="rate_limit"]`)),
	)
	screenshot("needs.png")

	run("pick SQLite", chromedp.Click(chromedp.CSS(`section.need[data-issue="DEMO-1"] button.choice[data-choice="SQLite"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-1"] .answer-status.ok`)))
	e.sessionFileHas("DEMO-1", "chose SQLite")

	run("approve the command", chromedp.Click(chromedp.CSS(`section.need[data-issue="DEMO-2"] button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-2"] .answer-status.ok`)))
	e.sessionFileHas("DEMO-2", "ran it")
	if _, err := os.Stat(filepath.Join(e.team.Worktrees.Path("DEMO-2"), "approved.txt")); err != nil {
		t.Errorf("the command approved in the page did not run: %v", err)
	}

	// The queue follows live: the answered question is gone, and the
	// planner that chose now waits with its ended turn.
	run("the queue updated live",
		chromedp.WaitVisible(chromedp.CSS(`section.need[data-issue="DEMO-1"][data-kind="turn"]`)))

	run("open the timeline",
		chromedp.Func(hash("#timeline/demo/1")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-timeline="loaded"] svg.timeline g.issue[data-issue="DEMO-1"] rect.phase`)),
		// No journal here: the states come from what the dashboard saw.
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline g.issue[data-issue="DEMO-1"] rect.activity[data-state="waiting_answer"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline g.issue[data-issue="DEMO-2"] rect.activity[data-state="waiting_permission"]`)))
	screenshot("timeline.png")
}
