package desktopnotify_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/internal/desktopnotify"
	"github.com/legion-dev/legion/units/sdtest"
)

// busConfig is a private session bus: no service directories (so no
// notification daemon of the machine is activated), anyone on it may own
// any name.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=@SOCKET@</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// privateBus starts a dbus-daemon of its own for t and returns its
// address; t's cleanup kills it (by its PID) and waits for it.
func privateBus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("dbus-daemon")
	sdtest.Require(t, "dbus-daemon on $PATH", err == nil)
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(busConfig, "@SOCKET@", sock)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // it may have exited: Wait reports it
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(line)
}

// receiver owns org.freedesktop.Notifications on a bus and records the
// notifications it is asked to show.
type receiver struct {
	caps []string
	mu   sync.Mutex
	got  []shown
}

type shown struct {
	App, Icon, Summary, Body string
	Replaces                 uint32
	Actions                  []string
	Hints                    map[string]dbus.Variant
	Timeout                  int32
}

func (r *receiver) GetCapabilities() ([]string, *dbus.Error) { return r.caps, nil }

func (r *receiver) Notify(app string, replaces uint32, icon, summary, body string, actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, shown{app, icon, summary, body, replaces, actions, hints, timeout})
	return uint32(len(r.got)), nil
}

func (r *receiver) shown() []shown {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]shown(nil), r.got...)
}

// serve puts r on the bus at addr under the service's name.
func serve(t *testing.T, addr string, r *receiver) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Export(r, desktopnotify.Path, desktopnotify.Interface); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(desktopnotify.Name, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v (reply %d)", desktopnotify.Name, err, reply)
	}
}

var links = notify.Links{Base: "http://127.0.0.1:7787"}

// TestDesktopShows: a message reaches the notification service on a real
// session bus, its title the summary and its link in the body (escaped,
// a hyperlink, where the server takes markup).
func TestDesktopShows(t *testing.T) {
	addr := privateBus(t)
	for _, tt := range []struct {
		name string
		caps []string
		want string // the body's end
	}{
		{"plain", []string{"body"}, "\n\nhttp://127.0.0.1:7787/#needs/demo/SAMPLE-1"},
		{"markup", []string{"body", "body-markup", "body-hyperlinks"}, "\n\n<a href=\"http://127.0.0.1:7787/#needs/demo/SAMPLE-1\">http://127.0.0.1:7787/#needs/demo/SAMPLE-1</a>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &receiver{caps: tt.caps}
			serve(t, addr, r)
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
			got := r.shown()
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
	addr := privateBus(t)
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
