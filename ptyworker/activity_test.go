package ptyworker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// The info method reports the activity of the moment of the call, not of
// the last liveness tick: the ticks here are an hour apart, so only the
// first one, at the start, ever runs.

func TestInfoActivityFollowsSessionFile(t *testing.T) {
	spec := testSpec(t, "sh", "-c", "while :; do sleep 1; done")
	spec.SessionFile = filepath.Join(spec.Cwd, "session.jsonl")
	spec.StaleAfter = proto.Duration(time.Hour)
	if err := os.WriteFile(spec.SessionFile, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tw := startWorker(t, spec, Options{Tick: time.Hour})
	c := tw.dial()
	waitFor(t, "the first liveness tick (watchdog verdict fresh)", func() bool {
		h, err := c.Health(ctxT(t))
		return err == nil && h.Watchdog == proto.WatchFresh
	})

	in, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	touched := in.StartedAt.Add(1500 * time.Millisecond) // after the start, so it counts
	if err := os.Chtimes(spec.SessionFile, touched, touched); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(spec.SessionFile)
	if err != nil {
		t.Fatal(err)
	}
	in, err = c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !in.LastActivity.Equal(st.ModTime()) {
		t.Errorf("Info().LastActivity = %v after the session file was touched; want its mtime %v", in.LastActivity, st.ModTime())
	}
}

func TestInfoActivityFollowsOutput(t *testing.T) {
	spec := testSpec(t, "sh", "-c", "read x; echo got $x; exec sleep 1000")
	tw := startWorker(t, spec, Options{Tick: time.Hour})
	c := tw.dial()
	waitFor(t, "the first liveness tick (watchdog verdict unwatched)", func() bool {
		h, err := c.Health(ctxT(t))
		return err == nil && h.Watchdog == proto.WatchUnwatched
	})
	in, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if !in.LastActivity.Before(before) {
		t.Fatalf("Info().LastActivity = %v before any output; want before %v", in.LastActivity, before)
	}
	if err := c.Input(ctxT(t), []byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Info().LastActivity at or after the output written after "+before.Format(time.RFC3339Nano), func() bool {
		in, err := c.Info(ctxT(t))
		return err == nil && !in.LastActivity.Before(before)
	})
}
