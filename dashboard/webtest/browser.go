// Package webtest drives the dashboard in a real headless Chromium for
// tests and benchmarks: Browser starts Debian's chromium through chromedp
// (installed by scripts/check-deps; a test skips without it, or fails with
// CI=true), and Start sets up a whole Legion under a private systemd user
// manager (units/sdtest) with the real helper, a team whose agent is the
// scripted agent (the demo's script), its controller, and the dashboard's
// server, for the browser to look at.
//
// It is for _test.go files only. It owns the browsers, the manager, the
// server and the directories it starts and makes, and stops and removes
// them at the test's cleanup; it never touches the real user's manager,
// home or browser profile.
package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// WaitFor is the generous deadline of every condition a test awaits in a
// page.
const WaitFor = 90 * time.Second

// ChromiumInstall is how to get the browser these tests need.
const ChromiumInstall = "apt-get install chromium (scripts/check-deps does it)"

// Chromium returns the path of Debian's chromium, skipping the test
// without it (failing it with CI=true).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	sdtest.Require(t, "chromium on $PATH ("+ChromiumInstall+")", false)
	return ""
}

// Browser is one headless Chromium with a fresh profile; Ctx is its one
// tab, for chromedp.Run.
type Browser struct {
	Ctx context.Context
	t   testing.TB
}

// NewBrowser starts headless Chromium with the flags of the dashboard's
// tests (no GPU, no QUIC, no background networking, component updates or
// sync; --no-sandbox only as root, where Chromium's own sandbox cannot
// run) and a profile in a temp dir. t.Cleanup closes it.
func NewBrowser(t testing.TB) *Browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser process to exit
	})
	// Starts the browser now, so a failure to start names itself.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &Browser{Ctx: ctx, t: t}
}

// Do runs actions in the tab with a generous deadline.
func (b *Browser) Do(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.Ctx, WaitFor)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Navigate opens url in the tab.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	if err := b.Do(chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("open %s: %v", url, err)
	}
}

// Eval evaluates the JavaScript expression js in the page into out.
func (b *Browser) Eval(js string, out any) error {
	ctx, cancel := context.WithTimeout(b.Ctx, WaitFor)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js))
	if err != nil {
		return fmt.Errorf("evaluate %s: %w", js, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("evaluate %s: decode %s: %w", js, v, err)
	}
	return nil
}

// WaitJS waits until the JavaScript expression js is true in the page;
// what names the condition in a failure.
func (b *Browser) WaitJS(what, js string) {
	b.t.Helper()
	waitfor.Check(b.t, WaitFor, what, func() error {
		var ok bool
		if err := b.Eval("Boolean("+js+")", &ok); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s is false", js)
		}
		return nil
	})
}

// Text is the text content of the first element matching the CSS
// selector sel, "" when none.
func (b *Browser) Text(sel string) string {
	var s string
	js := fmt.Sprintf("(document.querySelector(%q) || {}).textContent || ''", sel)
	if err := b.Eval(js, &s); err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// Screenshot saves the whole page as name.png in the test's artifact dir
// and returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, WaitFor)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(ArtifactDir(b.t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// ArtifactDir is where a test keeps what a person may want to look at:
// $LEGION_TEST_ARTIFACTS/<test name> when set, else a temp dir (removed
// with the test). It is created on first use.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv("LEGION_TEST_ARTIFACTS")
	if base == "" {
		return t.TempDir()
	}
	dir := filepath.Join(base, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
