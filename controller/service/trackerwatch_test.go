package service

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/internal/waitfor"
)

// TestWatchTracker: a write to the local tracker (as `legion issue
// label` makes) wakes the loop; reads (every tick's) and the
// controller's own writes do not.
func TestWatchTracker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tracker")
	s := local.Open(dir, "DEMO")
	ctx, cancel := context.WithCancel(t.Context())
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	own := &ownWrites{path: s.Path()}
	go func() { done <- watchTracker(ctx, s.Path(), wake, own) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watchTracker: %v", err)
		}
	}()
	// The watch is set up once a write is seen: write until one wakes it.
	waitfor.Check(t, 30*time.Second, "a write wakes the loop", func() error {
		if _, err := s.Add(ctx, "one"); err != nil {
			return err
		}
		select {
		case <-wake:
			return nil
		case <-time.After(100 * time.Millisecond):
			return context.DeadlineExceeded
		}
	})
	for i := 0; i < 20; i++ {
		if _, err := s.Issues(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddLabel(ctx, "DEMO-1", "worker-done"); err != nil {
		t.Fatal(err)
	}
	<-wake
	// Reads after the last write: nothing more may come.
	for i := 0; i < 20; i++ {
		if _, err := s.Issues(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The controller's own writes: nothing more may come either.
	ctl := ownTracker{Store: s, own: own}
	if err := ctl.AddLabel(ctx, "DEMO-1", "user-input-needed"); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Comment(ctx, "DEMO-1", "asks"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Errorf("reads of the tracker or the controller's own writes woke the loop")
	case <-time.After(300 * time.Millisecond):
	}
	// A person's write after the controller's wakes it.
	if err := s.CommentAs(ctx, "DEMO-1", "ana", "SQLite"); err != nil {
		t.Fatal(err)
	}
	<-wake
}
