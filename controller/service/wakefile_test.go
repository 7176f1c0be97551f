package service

import (
	"sync/atomic"

	"bytes"
	"context"
	"fmt"
	"github.com/legion-dev/legion/controller/local"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/waitfor"
)

// syncBuffer is a bytes.Buffer safe for the watcher's goroutine and the
// test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFollowWake: team.Wake (the dashboard's write on a webhook delivery)
// wakes the loop and the reason is logged; other files of the team's
// state directory wake nothing; a tracker that caches its board forgets it
// on each wake.
func TestFollowWake(t *testing.T) {
	dir := t.TempDir() + "/teams/6f1c2e0a"
	var logged syncBuffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithCancel(t.Context())
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	tracker := &forgetful{}
	go func() {
		defer close(done)
		followWake(ctx, team.WakePath(dir), tracker, wake, log)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// The watch is set up once a wake is seen: wake until one comes.
	waitfor.Check(t, 30*time.Second, "a wake file wakes the loop", func() error {
		if err := team.Wake(dir, "github ping delivery first"); err != nil {
			return err
		}
		select {
		case <-wake:
			return nil
		case <-time.After(100 * time.Millisecond):
			return context.DeadlineExceeded
		}
	})
	// Another file of the state directory: no wake.
	if err := team.Wake(dir+"/agents", "not the team's wake file"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Errorf("a file in a subdirectory woke the loop")
	case <-time.After(300 * time.Millisecond):
	}
	forgot := tracker.forgot.Load()
	if err := team.Wake(dir, "github issues delivery 72d3162e"); err != nil {
		t.Fatal(err)
	}
	<-wake
	if tracker.forgot.Load() <= forgot {
		t.Errorf("the wake did not make the tracker forget its last board")
	}
	waitfor.Check(t, 30*time.Second, "the wake's reason logged", func() error {
		if got := logged.String(); !strings.Contains(got, `msg=woken by="github issues delivery 72d3162e"`) {
			return fmt.Errorf("the controller's log:\n%s", got)
		}
		return nil
	})
}

// forgetful is a tracker that caches its board (as github.Tracker does)
// and counts the times it is told to forget it.
type forgetful struct {
	local.Store
	forgot atomic.Int32
}

func (f *forgetful) Forget() { f.forgot.Add(1) }
