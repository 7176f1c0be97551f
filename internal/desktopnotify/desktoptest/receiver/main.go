// Command receiver is a desktop's notification server for tests that run
// in a whole system (the booted tier): it owns org.freedesktop.Notifications
// on the session bus of its environment (DBUS_SESSION_BUS_ADDRESS, else
// $XDG_RUNTIME_DIR/bus), prints each notification it is asked to show as
// one JSON line ({"app", "summary", "body"}) on stdout, and exits after
// -n of them, or after -timeout with status 1. Only tests build it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/legion-dev/legion/internal/desktopnotify"
)

type server struct{ shown chan map[string]string }

func (s *server) GetCapabilities() ([]string, *dbus.Error) { return []string{"body"}, nil }

func (s *server) Notify(app string, replaces uint32, icon, summary, body string, actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	s.shown <- map[string]string{"app": app, "summary": summary, "body": body}
	return 1, nil
}

func main() {
	n := flag.Int("n", 1, "exit after this many notifications")
	timeout := flag.Duration("timeout", time.Minute, "exit 1 when they did not come within this")
	flag.Parse()
	addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	if addr == "" {
		addr = "unix:path=" + filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "bus")
	}
	conn, err := dbus.Connect(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "receiver: connect to the session bus:", err)
		os.Exit(1)
	}
	s := &server{shown: make(chan map[string]string, *n)}
	if err := conn.Export(s, desktopnotify.Path, desktopnotify.Interface); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
	if reply, err := conn.RequestName(desktopnotify.Name, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		fmt.Fprintf(os.Stderr, "receiver: own %s: %v (reply %d)\n", desktopnotify.Name, err, reply)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "receiver: ready on", addr)
	deadline := time.After(*timeout)
	for i := 0; i < *n; i++ {
		select {
		case m := <-s.shown:
			b, _ := json.Marshal(m)
			fmt.Println(string(b))
		case <-deadline:
			fmt.Fprintf(os.Stderr, "receiver: %d of %d notifications within %s\n", i, *n, *timeout)
			os.Exit(1)
		}
	}
}
