package ptyworker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// The transcript is one file per session under the state directory: the raw
// PTY output of every run, appended across unit restarts, with marker lines
// between runs:
//
//	[legion] 2026-02-11T10:00:00Z run 2 start (resume): claude --resume …
//	[legion] 2026-02-11T10:10:12Z run 2 exit: code 1; reason: exited
//
// Each marker line starts with "\r\n[legion] " and ends with "\r\n". The
// transcript trails the ring in its own goroutine, so a slow disk never
// stalls the agent; bytes it could not keep up with are replaced by a
// "[legion] … bytes of output lost" marker.

// transcriptDelay is how long output may wait to be written (see follow).
const transcriptDelay = 20 * time.Millisecond

// MarkerPrefix starts every line the worker itself writes to a transcript.
const MarkerPrefix = "[legion] "

type transcript struct {
	f      *os.File
	path   string
	log    *slog.Logger
	sub    *subscriber
	marks  chan markReq
	buf    []byte
	failed bool // a write failed; logged once, then writes are skipped
}

type markReq struct {
	text string
	done chan struct{}
}

// openTranscript opens (creating, 0600) the transcript for appending.
func openTranscript(path string, log *slog.Logger) (*transcript, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open transcript: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm() != 0o600 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, fmt.Errorf("transcript %s: set mode 0600: %w", path, err)
		}
	}
	return &transcript{
		f: f, path: path, log: log,
		sub:   newSubscriber(0, nil),
		marks: make(chan markReq),
		buf:   make([]byte, 64<<10),
	}, nil
}

// markerLine formats one marker line.
func markerLine(t time.Time, text string) []byte {
	return []byte("\r\n" + MarkerPrefix + t.UTC().Format(time.RFC3339) + " " + text + "\r\n")
}

// writeMarker writes a marker directly; only before follow starts or after
// it returned.
func (t *transcript) writeMarker(text string) {
	t.write(markerLine(time.Now(), text))
}

func (t *transcript) write(p []byte) {
	if t.failed {
		return
	}
	if _, err := t.f.Write(p); err != nil {
		t.failed = true
		t.log.Error("transcript write failed; the rest of this run is not recorded", "path", t.path, "err", err)
	}
}

// drain writes the output from the transcript's offset up to the head.
func (t *transcript) drain(o *output) {
	for {
		off := t.sub.next.Load()
		n, err := o.readAt(t.buf, off)
		if errors.Is(err, ErrTooOld) {
			oldest, _, _ := o.bounds()
			t.write(markerLine(time.Now(), fmt.Sprintf("%d bytes of output lost (the transcript fell behind)", oldest-off)))
			t.sub.next.Store(oldest)
			continue
		}
		if err != nil || n == 0 {
			return
		}
		t.write(t.buf[:n])
		t.sub.next.Store(off + uint64(n))
	}
}

// follow copies output to the file as it comes and serves marker requests
// (after draining, so a marker follows all output before it). It returns
// once stop is closed, after a last drain.
//
// Writes are batched: output is written transcriptDelay after the first of
// it arrived, or as soon as a batch is pending (a quarter of the ring: see
// subscriber), so neither a stream of small PTY reads nor a flood
// costs one write(2) per read. While the delay runs the follower is lazy.
func (t *transcript) follow(o *output, stop <-chan struct{}) {
	delay := time.NewTimer(transcriptDelay)
	delay.Stop()
	var due <-chan time.Time
	for {
		select {
		case <-t.sub.wake:
			if o.head()-t.sub.next.Load() >= t.sub.batch {
				t.drain(o)
			}
			if due == nil {
				t.sub.lazy.Store(true)
				delay.Reset(transcriptDelay)
				due = delay.C
			}
		case <-due:
			due = nil
			t.sub.lazy.Store(false)
			t.drain(o)
		case m := <-t.marks:
			t.drain(o)
			t.write(markerLine(time.Now(), m.text))
			close(m.done)
		case <-stop:
			t.drain(o)
			return
		}
	}
}

// mark asks the follower to write a marker after all output so far; it
// waits at most timeout.
func (t *transcript) mark(text string, timeout time.Duration) error {
	req := markReq{text: text, done: make(chan struct{})}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case t.marks <- req:
	case <-timer.C:
		return fmt.Errorf("transcript %s: marker not written within %s", t.path, timeout)
	}
	select {
	case <-req.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("transcript %s: marker not written within %s", t.path, timeout)
	}
}

func (t *transcript) close() error {
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("close transcript %s: %w", t.path, err)
	}
	return nil
}
