package ptyworker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestTranscript: `legion-pty-worker --transcript` (sessions.logs of a
// session on a cluster) writes where it starts, then the transcript from
// an offset or a tail; with follow, what is appended, until stopped.
func TestTranscript(t *testing.T) {
	spec := testSpec(t, "/bin/true")
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := proto.WriteSpec(specPath, spec); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	never := make(chan struct{})
	var out bytes.Buffer
	if err := Transcript(ctx, specPath, 0, 0, false, never, &out); err == nil || !strings.Contains(err.Error(), spec.Name) {
		t.Errorf("Transcript of none = %v; want an error naming the session", err)
	}
	if err := os.MkdirAll(filepath.Dir(spec.TranscriptPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec.TranscriptPath(), []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		offset, tail int64
		want         string
	}{
		{0, 0, "0\n0123456789"},
		{4, 0, "4\n456789"},
		{0, 3, "7\n789"},
		{0, 99, "0\n0123456789"},
		{12, 0, "12\n"},
	} {
		out.Reset()
		if err := Transcript(ctx, specPath, c.offset, c.tail, false, never, &out); err != nil || out.String() != c.want {
			t.Errorf("Transcript(offset %d, tail %d) = %q, %v; want %q", c.offset, c.tail, out.String(), err, c.want)
		}
	}

	stop := make(chan struct{})
	followed := &logBuffer{t: t} // a locked buffer
	done := make(chan error, 1)
	go func() { done <- Transcript(context.Background(), specPath, 0, 2, true, stop, followed) }()
	waitfor.Check(t, 10*time.Second, "the tail", func() error {
		if followed.String() != "8\n89" {
			return os.ErrNotExist
		}
		return nil
	})
	f, err := os.OpenFile(spec.TranscriptPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("abc")
	f.Close()
	waitfor.Check(t, 10*time.Second, "what was appended", func() error {
		if followed.String() != "8\n89abc" {
			return os.ErrNotExist
		}
		return nil
	})
	close(stop)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Transcript with follow, stopped = %v; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Transcript with follow did not stop")
	}
}
