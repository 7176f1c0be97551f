package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/notify/notifytest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// receivers are a team's two HTTP channels, each against its local
// receiver.
type receivers struct {
	hook     *notifytest.Webhook
	ntfy     *notifytest.Ntfy
	channels []notify.Channel
}

func newReceivers(t *testing.T) receivers {
	t.Helper()
	r := receivers{hook: notifytest.NewWebhook(t, "whsec"), ntfy: notifytest.NewNtfy(t, "topic", "")}
	w, err := notify.NewWebhook(r.hook.URL, "whsec", nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := notify.NewNtfy(r.ntfy.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.channels = []notify.Channel{w, n}
	return r
}

// start runs a notifier on r's channels with its state in path until
// the test ends or the returned stop is called.
func start(t *testing.T, r receivers, path string) (*notify.Notifier, func()) {
	t.Helper()
	return startRetry(t, r, path, time.Millisecond)
}

// startRetry is start with retryMin the first wait after a failure.
func startRetry(t *testing.T, r receivers, path string, retryMin time.Duration) (*notify.Notifier, func()) {
	t.Helper()
	n, err := notify.New(notify.Options{Team: "demo", Channels: r.channels, Links: links, StatePath: path,
		RetryMin: retryMin, RetryMax: max(retryMin, 10*time.Millisecond), Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	// t.Context is cancelled before cleanups run: stop waits for Run
	// once, whoever calls it first.
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return n, stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func wait(issue string, since time.Time) controller.Wait {
	return controller.Wait{Key: issue + "/input", Issue: issue, Title: "title of " + issue, Kind: controller.WaitQuestion,
		Asked: "The implement agent asks: " + issue + "?", AskedHash: "h-" + issue, Since: since}
}

// issuesOf lists the issues of each webhook delivery, in order.
func issuesOf(ds []notifytest.Delivery) [][]string {
	var out [][]string
	for _, d := range ds {
		var is []string
		for _, w := range d.Message.Waits {
			is = append(is, w.Issue)
		}
		out = append(out, is)
	}
	return out
}

// TestNotifierNoDuplicateAfterRestart: a wait announced before a restart
// is not announced again by the restarted notifier, which announces a
// wait that began meanwhile; a wait whose send was still failing at the
// restart is retried by the restarted one.
func TestNotifierNoDuplicateAfterRestart(t *testing.T) {
	r := newReceivers(t)
	path := filepath.Join(t.TempDir(), notify.StateFile)
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	// The first notifier retries after an hour: once D-2's first try on
	// ntfy failed, nothing is in flight when it stops, and the restarted
	// one retries at once.
	n, stop := startRetry(t, r, path, time.Hour)
	if err := n.Observe([]controller.Wait{wait("D-1", t0)}, t0); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "D-1 on both channels", func() bool {
		return len(r.hook.Deliveries()) == 1 && len(r.ntfy.Messages()) == 1
	})
	r.ntfy.Fail(1 << 20) // ntfy is down from now on
	if err := n.Observe([]controller.Wait{wait("D-1", t0), wait("D-2", t0.Add(time.Minute))}, t0); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "D-2 on the webhook", func() bool { return len(r.hook.Deliveries()) == 2 })
	waitfor.Check(t, time.Minute, "D-2's ntfy send failing, recorded", func() error {
		return stateHas(path, "D-2/input", "ntfy", func(d map[string]any) bool { return d["tries"] != nil })
	})
	// A send cut by the stop may have reached the receiver unrecorded
	// (delivery is at least once): stop once the webhook's is recorded.
	waitfor.Check(t, time.Minute, "D-2's webhook send recorded", func() error {
		return stateHas(path, "D-2/input", "webhook", func(d map[string]any) bool { return d["sent"] != nil })
	})
	stop()

	r.ntfy.Fail(0)
	n2, _ := start(t, r, path)
	// The controller's first tick after the restart: D-1 and D-2 still
	// wait, D-3 began. D-1 is older, so a resend of it would come first.
	if err := n2.Observe([]controller.Wait{wait("D-1", t0), wait("D-2", t0.Add(time.Minute)), wait("D-3", t0.Add(2*time.Minute))}, t0); err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, time.Minute, "D-3 on both channels", func() error {
		if h, n := len(r.hook.Deliveries()), len(r.ntfy.Messages()); h != 3 || n != 3 {
			return fmt.Errorf("webhook took %v, ntfy %d", issuesOf(r.hook.Deliveries()), n)
		}
		return nil
	})
	if got, want := issuesOf(r.hook.Deliveries()), [][]string{{"D-1"}, {"D-2"}, {"D-3"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("webhook deliveries %v; want %v", got, want)
	}
	var titles []string
	for _, m := range r.ntfy.Messages() {
		titles = append(titles, m.Title)
	}
	// D-2's retry may come after D-3: its backoff may still run.
	slices.Sort(titles)
	if want := []string{"demo D-1: the agent asks a question", "demo D-2: the agent asks a question", "demo D-3: the agent asks a question"}; !slices.Equal(titles, want) {
		t.Errorf("ntfy titles %q; want %q", titles, want)
	}
}

// stateHas checks the delivery of key on channel in notify.json.
func stateHas(path, key, channel string, ok func(map[string]any) bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var st struct {
		Waits map[string]struct {
			Channels map[string]map[string]any `json:"channels"`
		} `json:"waits"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	d := st.Waits[key].Channels[channel]
	if d == nil || !ok(d) {
		return fmt.Errorf("%s on %s: %v", key, channel, d)
	}
	return nil
}

// TestNotifierDigest: waits that begin in one tick, DigestAt or more, go
// out as one message listing them; one more later goes out alone.
func TestNotifierDigest(t *testing.T) {
	r := newReceivers(t)
	n, _ := start(t, r, filepath.Join(t.TempDir(), notify.StateFile))
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	ws := []controller.Wait{wait("D-3", t0.Add(2)), wait("D-1", t0), wait("D-4", t0.Add(3)), wait("D-2", t0.Add(1))}
	if err := n.Observe(ws, t0); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "the digest on both channels", func() bool {
		return len(r.hook.Deliveries()) == 1 && len(r.ntfy.Messages()) == 1
	})
	if err := n.Observe(append(ws, wait("D-5", t0.Add(4))), t0); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "D-5 on both channels", func() bool {
		return len(r.hook.Deliveries()) == 2 && len(r.ntfy.Messages()) == 2
	})
	if got, want := issuesOf(r.hook.Deliveries()), [][]string{{"D-1", "D-2", "D-3", "D-4"}, {"D-5"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("webhook deliveries %v; want %v", got, want)
	}
	d := r.hook.Deliveries()[0].Message
	if d.URL != "http://127.0.0.1:7787/#needs/demo" || d.Waits[0].URL != "http://127.0.0.1:7787/#needs/demo/D-1" {
		t.Errorf("digest links %q, %q; want the team's queue and each card", d.URL, d.Waits[0].URL)
	}
	msgs := r.ntfy.Messages()
	if msgs[0].Title != "demo: 4 waits for you" || msgs[0].Click != "http://127.0.0.1:7787/#needs/demo" {
		t.Errorf("ntfy digest %q → %q; want \"demo: 4 waits for you\" → the team's queue", msgs[0].Title, msgs[0].Click)
	}
	if want := "D-1 (question) title of D-1\nD-2 (question) title of D-2\nD-3 (question) title of D-3\nD-4 (question) title of D-4"; msgs[0].Message != want {
		t.Errorf("ntfy digest text %q; want %q", msgs[0].Message, want)
	}
}

// TestNotifierRetry: a receiver that fails gets the same message again
// (the same delivery id) until it takes it, once.
func TestNotifierRetry(t *testing.T) {
	r := newReceivers(t)
	r.hook.Fail(3)
	n, _ := start(t, r, filepath.Join(t.TempDir(), notify.StateFile))
	t0 := time.Now()
	if err := n.Observe([]controller.Wait{wait("D-1", t0)}, t0); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "D-1 on the webhook after 3 failures", func() bool { return len(r.hook.Deliveries()) == 1 })
	// A wait that ends and begins again (an answer, then a new question)
	// is a new wait; the same key staying is not.
	if err := n.Observe([]controller.Wait{wait("D-1", t0)}, t0); err != nil {
		t.Fatal(err)
	}
	again := wait("D-1", t0.Add(time.Hour))
	again.New = true
	if err := n.Observe([]controller.Wait{again}, t0); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "D-1's new episode on the webhook", func() bool { return len(r.hook.Deliveries()) == 2 })
	ds := r.hook.Deliveries()
	if ds[0].Message.Delivery == ds[1].Message.Delivery {
		t.Errorf("both episodes have delivery %s; want a new one", ds[0].Message.Delivery)
	}
	// ntfy may have taken the first episode or only the second: the
	// second replaced the first before it was sent there.
	waitfor.True(t, time.Minute, "D-1 on ntfy", func() bool { return len(r.ntfy.Messages()) >= 1 })
}

// TestNewCorruptState: a notify.json that is not the notifier's is an
// error naming the file, not a silent resend of everything.
func TestNewCorruptState(t *testing.T) {
	path := filepath.Join(t.TempDir(), notify.StateFile)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := notify.New(notify.Options{Team: "demo", StatePath: path})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("New with a corrupt %s: %v; want an error naming it", path, err)
	}
}
