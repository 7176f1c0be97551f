// Package desktoptest holds a private D-Bus session bus (a real
// dbus-daemon, configured with no service directories, so no notification
// server of the machine is started on it) and a receiver that owns
// org.freedesktop.Notifications on a bus and records what it is asked to
// show. For tests only: it must never be linked by code that ships.
package desktoptest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"

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

// PrivateBus starts a dbus-daemon of its own for t and returns its
// address; t's cleanup kills it (by its PID) and waits for it.
func PrivateBus(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("dbus-daemon")
	sdtest.Require(t, "dbus-daemon on $PATH (apt-get install dbus-daemon)", err == nil)
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

// Receiver owns org.freedesktop.Notifications on a bus and records the
// notifications it is asked to show.
type Receiver struct {
	// Caps are what GetCapabilities answers.
	Caps []string
	mu   sync.Mutex
	got  []Shown
}

// Shown is one Notify call's arguments.
type Shown struct {
	App, Icon, Summary, Body string
	Replaces                 uint32
	Actions                  []string
	Hints                    map[string]dbus.Variant
	Timeout                  int32
}

// GetCapabilities is the service's method.
func (r *Receiver) GetCapabilities() ([]string, *dbus.Error) { return r.Caps, nil }

// Notify is the service's method: it records the call.
func (r *Receiver) Notify(app string, replaces uint32, icon, summary, body string, actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, Shown{app, icon, summary, body, replaces, actions, hints, timeout})
	return uint32(len(r.got)), nil
}

// Shown are the notifications shown so far.
func (r *Receiver) Shown() []Shown {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Shown(nil), r.got...)
}

// Serve puts r on the bus at addr under the service's name until t ends.
func (r *Receiver) Serve(t testing.TB, addr string) {
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
