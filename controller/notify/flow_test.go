package notify_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/internal/waitfor"
)

// agents are the team's sessions as a test sets them, and a dispatcher
// that starts none (the issues under test have their sessions).
type agents struct{ sessions []controller.Session }

func (a *agents) Sessions(context.Context) ([]controller.Session, error)  { return a.sessions, nil }
func (a *agents) Dispatch(context.Context, string, controller.Mode) error { return nil }
func (a *agents) Respond(context.Context, string, string, string, string) error {
	return nil
}
func (a *agents) End(context.Context, string, string) error { return nil }

// TestTickToReceivers: the controller's tick over the local tracker
// escalates a question, and the notifier fed with the tick's waits (as
// legion@TEAM feeds it) announces it once: not on the next ticks, where
// the issue still waits, and not after a restart of the notifier; a
// failed worker is announced; three questions in one tick go out as one
// digest.
func TestTickToReceivers(t *testing.T) {
	ctx := t.Context()
	tr := local.Open(t.TempDir(), "DEMO")
	for range 6 {
		if _, err := tr.Add(ctx, "an issue"); err != nil {
			t.Fatal(err)
		}
	}
	ag := &agents{}
	asking := func(issue, q string) controller.Session {
		return controller.Session{Name: issue + "-plan", Issue: issue, Mode: controller.ModePlan, Unit: issue + "-plan.service",
			State: controller.SessionWaitingInput, Question: q}
	}
	running := func(issue string) controller.Session {
		return controller.Session{Name: issue + "-plan", Issue: issue, Mode: controller.ModePlan, State: controller.SessionRunning}
	}
	ag.sessions = []controller.Session{asking("DEMO-1", "Postgres or SQLite?"), running("DEMO-2"), running("DEMO-3"),
		running("DEMO-4"), running("DEMO-5"), running("DEMO-6")}
	src := controller.Sources{Tracker: tr, Sessions: ag}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tick := func() []controller.Wait {
		t.Helper()
		r := controller.Tick(ctx, src, ag, log)
		if r.Err != nil || r.Failed > 0 {
			t.Fatalf("Tick = %+v", r)
		}
		return r.Waits
	}

	rx := newReceivers(t)
	path := filepath.Join(t.TempDir(), "notify.json")
	n, stop := start(t, rx, path)
	if err := n.Observe(tick(), time.Now()); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "DEMO-1's question on the webhook", func() bool { return len(rx.hook.Deliveries()) == 1 })
	m := rx.hook.Deliveries()[0].Message
	if w := m.Waits[0]; w.Issue != "DEMO-1" || w.Kind != controller.WaitQuestion || !strings.Contains(w.Asked, "Postgres or SQLite?") {
		t.Errorf("announced %+v; want DEMO-1's question", w)
	}
	for range 2 { // DEMO-1 still waits: nothing new
		if err := n.Observe(tick(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range []string{"webhook", "ntfy"} { // what the restarted one reads
		waitfor.Check(t, time.Minute, "DEMO-1 recorded sent on "+ch, func() error {
			return stateHas(path, "DEMO-1/input", ch, func(d map[string]any) bool { return d["sent"] != nil })
		})
	}
	stop()

	n2, _ := start(t, rx, path)
	ag.sessions[1] = controller.Session{Name: "DEMO-2-plan", Issue: "DEMO-2", Mode: controller.ModePlan,
		Unit: "legion-x-DEMO-2-plan.service", State: controller.SessionFailed, Cause: "start limit hit"}
	if err := n2.Observe(tick(), time.Now()); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "DEMO-2's failed worker on the webhook", func() bool { return len(rx.hook.Deliveries()) == 2 })

	ag.sessions[2], ag.sessions[3], ag.sessions[4] = asking("DEMO-3", "a?"), asking("DEMO-4", "b?"), asking("DEMO-5", "c?")
	if err := n2.Observe(tick(), time.Now()); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, time.Minute, "the digest on both channels", func() bool {
		return len(rx.hook.Deliveries()) == 3 && len(rx.ntfy.Messages()) == 3
	})
	if got, want := issuesOf(rx.hook.Deliveries()), [][]string{{"DEMO-1"}, {"DEMO-2"}, {"DEMO-3", "DEMO-4", "DEMO-5"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("webhook deliveries %v; want %v", got, want)
	}
	if got := rx.hook.Deliveries()[1].Message.Waits[0]; got.Kind != controller.WaitFailed || !strings.Contains(got.Asked, "start limit hit") {
		t.Errorf("DEMO-2 announced as %+v; want its failed worker and why", got)
	}
}
