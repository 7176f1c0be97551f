package notify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
)

// FuzzStateFile: notify.json is read back after a restart, and a disk or a
// person may have mangled it. Whatever it holds, New either refuses it
// with an error or yields a notifier that observes waits and finds what
// is due without panicking, and writes a file New reads again.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"waits":{"D-1/input":{"wait":{"key":"D-1/input","issue":"D-1","kind":"question"},"channels":{"webhook":{"tries":2,"next":"2026-11-29T09:00:00Z"},"ntfy":{"sent":"2026-11-29T09:00:00Z"}}}}}`))
	f.Add([]byte(`{"waits":{"a":null}}`))
	f.Add([]byte(`{"waits":{"a":{"channels":{"webhook":null}}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), StateFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		o := Options{Team: "demo", Channels: []Channel{named("webhook"), named("ntfy")}, StatePath: path}
		n, err := New(o)
		if err != nil {
			return
		}
		now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		if err := n.Observe([]controller.Wait{{Key: "D-1/input", Issue: "D-1"}, {Key: "D-2/input", Issue: "D-2", New: true}}, now); err != nil {
			t.Fatalf("Observe: %v", err)
		}
		for _, ch := range []string{"webhook", "ntfy"} {
			n.due(ch, now)
		}
		if _, err := New(o); err != nil {
			t.Fatalf("New of the file Observe wrote: %v", err)
		}
	})
}

// named is a channel that is never sent on.
type named string

func (c named) Name() string { return string(c) }
func (c named) Send(context.Context, Message) (string, error) {
	return "", errors.New("not sent in this test")
}
