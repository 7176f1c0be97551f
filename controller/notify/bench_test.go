package notify_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/notify/notifytest"
	"github.com/legion-dev/legion/internal/benchreport"
)

// BenchmarkNotifyDelay: the delay from an agent's question reaching the
// controller (its session turning waiting_input, as the helper reports
// the agent's hook event) to a signed webhook delivery taken by a local
// receiver: one tick over the local tracker (collect, decide, the
// escalation's comment and label), Observe (notify.json written) and the
// send. The median of 20 questions, each on an issue of its own; the
// hook's own path to the helper is not in it (see the helper's
// benchmarks).
func BenchmarkNotifyDelay(b *testing.B) {
	const n = 20
	ctx := context.Background()
	tr := local.Open(b.TempDir(), "DEMO")
	for range n {
		if _, err := tr.Add(ctx, "an issue"); err != nil {
			b.Fatal(err)
		}
	}
	ag := &agents{}
	for i := range n {
		id := fmt.Sprintf("DEMO-%d", i+1)
		ag.sessions = append(ag.sessions, controller.Session{Name: id + "-plan", Issue: id, Mode: controller.ModePlan, State: controller.SessionRunning})
	}
	hook := notifytest.NewWebhook(b, "whsec")
	w, err := notify.NewWebhook(hook.URL, "whsec", nil)
	if err != nil {
		b.Fatal(err)
	}
	nt, err := notify.New(notify.Options{Team: "demo", Channels: []notify.Channel{w}, Links: links,
		StatePath: filepath.Join(b.TempDir(), notify.StateFile)})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- nt.Run(rctx) }()
	defer func() { cancel(); <-done }()
	src := controller.Sources{Tracker: tr, Sessions: ag}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var delays []time.Duration
	// Each call is the 20 questions, whatever b.N: a question is asked
	// once.
	for i := range n {
		ag.sessions[i].State, ag.sessions[i].Question = controller.SessionWaitingInput, "which?"
		start := time.Now()
		r := controller.Tick(ctx, src, ag, log)
		if r.Err != nil || r.Failed > 0 {
			b.Fatalf("Tick = %+v", r)
		}
		if err := nt.Observe(r.Waits, time.Now()); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for len(hook.Deliveries()) < i+1 {
			if time.Now().After(deadline) {
				b.Fatalf("question %d: no delivery after a minute (rejected: %v)", i+1, hook.Rejected())
			}
			time.Sleep(50 * time.Microsecond)
		}
		delays = append(delays, time.Since(start))
	}
	benchreport.MS(b, benchreport.Median(delays), "ms/notification")
}
