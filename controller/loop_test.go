package controller_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/linear"
	"github.com/legion-dev/legion/controller/linear/lineartest"
)

// TestLoopTickTimeout: a tracker that does not answer fails the tick at the
// tick timeout (the real Linear client, against a local Linear that holds
// every request), so the loop goes on ticking and feeding the heartbeat
// instead of waiting for the HTTP timeout and retries.
func TestLoopTickTimeout(t *testing.T) {
	srv := lineartest.NewServer(t, "lin_api_TESTKEY0123456789", "ENG")
	t.Setenv("LEGION_TEST_LINEAR_API_KEY", "lin_api_TESTKEY0123456789")
	tr, err := linear.New(linear.Options{Team: "ENG", APIKeyEnv: "LEGION_TEST_LINEAR_API_KEY", Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	srv.Lock() // every request waits on the server's lock: Linear hangs
	t.Cleanup(srv.Unlock)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	beats := make(chan controller.TickResult, 10)
	done := make(chan error, 1)
	go func() {
		done <- controller.Loop(ctx, controller.LoopOptions{
			Sources:     controller.Sources{Tracker: tr},
			Interval:    10 * time.Millisecond,
			TickTimeout: 200 * time.Millisecond,
			Heartbeat:   func(r controller.TickResult) { beats <- r },
			Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	for i := range 2 {
		select {
		case r := <-beats:
			if !errors.Is(r.Err, context.DeadlineExceeded) {
				t.Errorf("tick %d: err %v; want the tick's deadline exceeded", i+1, r.Err)
			}
		case <-ctx.Done():
			t.Fatalf("no heartbeat %d: the tick hangs with the tracker", i+1)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Loop: %v", err)
	}
}
