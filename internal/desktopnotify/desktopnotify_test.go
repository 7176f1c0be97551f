package desktopnotify_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/internal/desktopnotify"
	"github.com/legion-dev/legion/internal/desktopnotify/desktoptest"
)

var links = notify.Links{Base: "http://127.0.0.1:7787"}

// TestDesktopShows: a message reaches the notification service on a real
// session bus, its title the summary and its link in the body (escaped,
// a hyperlink, where the server takes markup).
func TestDesktopShows(t *testing.T) {
	addr := desktoptest.PrivateBus(t)
	for _, tt := range []struct {
		name string
		caps []string
		want string // the body's end
	}{
		{"plain", []string{"body"}, "\n\nhttp://127.0.0.1:7787/#needs/demo/SAMPLE-1"},
		{"markup", []string{"body", "body-markup", "body-hyperlinks"}, "\n\n<a href=\"http://127.0.0.1:7787/#needs/demo/SAMPLE-1\">http://127.0.0.1:7787/#needs/demo/SAMPLE-1</a>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &desktoptest.Receiver{Caps: tt.caps}
			r.Serve(t, addr)
			d := &desktopnotify.Desktop{Address: addr}
			m := notify.Sample("demo", links, time.Now())
			m.Waits[0].Asked = "Use <b>x</b> & y?"
			answer, err := d.Send(t.Context(), m)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if answer != "shown, id 1" {
				t.Errorf("Send answered %q; want shown, id 1", answer)
			}
			got := r.Shown()
			if len(got) != 1 {
				t.Fatalf("service showed %d notifications; want 1", len(got))
			}
			s := got[0]
			if s.App != "Legion" || s.Summary != m.Title() || s.Timeout != -1 {
				t.Errorf("Notify(app %q, summary %q, timeout %d); want Legion, %q, -1", s.App, s.Summary, s.Timeout, m.Title())
			}
			if !strings.HasSuffix(s.Body, tt.want) {
				t.Errorf("body %q; want it to end %q", s.Body, tt.want)
			}
			escaped := slices.Contains(tt.caps, "body-markup")
			if escaped != strings.Contains(s.Body, "&lt;b&gt;x&lt;/b&gt; &amp; y?") {
				t.Errorf("body %q: markup escaped = %v; want %v", s.Body, !escaped, escaped)
			}
			if u, ok := s.Hints["urgency"].Value().(byte); !ok || u != 1 {
				t.Errorf("urgency hint %v; want byte 1", s.Hints["urgency"])
			}
		})
	}
}

// TestDesktopUnavailable: no bus, or a bus without the service, is
// notify.ErrUnavailable (skipped), not an error to retry.
func TestDesktopUnavailable(t *testing.T) {
	addr := desktoptest.PrivateBus(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	for _, tt := range []struct{ name, addr string }{
		{"no bus", ""},
		{"dead bus", "unix:path=" + filepath.Join(t.TempDir(), "nobus")},
		{"no service", addr},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := (&desktopnotify.Desktop{Address: tt.addr}).Send(ctx, notify.Sample("demo", links, time.Now()))
			if !errors.Is(err, notify.ErrUnavailable) {
				t.Errorf("Send: %v; want notify.ErrUnavailable", err)
			}
		})
	}
}
