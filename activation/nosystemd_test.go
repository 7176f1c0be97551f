package activation

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
)

// TestNoSystemd: a helper with NoSystemd (the controller's pod) starts
// where no user manager is reachable, as a helper without it cannot;
// it recovers nothing, lists no session, refuses a spawn on this machine
// with ErrNoSystemd's message, and takes a controller's SIGTERM
// (team.stop if stopping) as no stop of the team. Its sessions on a
// cluster are TestControllerPod's (contrib/kubernetes).
func TestNoSystemd(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt) // no systemd/private, no bus here
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(rt, "no-bus"))
	dirs := func() Options {
		return Options{RuntimeDir: filepath.Join(t.TempDir(), "run"), StateDir: filepath.Join(t.TempDir(), "state")}
	}

	// Without NoSystemd the same environment fails the helper's start:
	// what the rest of the test shows is NoSystemd's.
	o := dirs()
	o.SocketPath = filepath.Join(t.TempDir(), "legion.sock")
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	if err := h.Run(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Run without a user manager, NoSystemd unset = %v (ctx %v); want a failure to reach systemd", err, ctx.Err())
	}

	o = dirs()
	o.NoSystemd = true
	ip := startInProcess(t, false, o)
	c := ip.client(t)
	if _, err := c.Spawn(t.Context(), testLaunch("local", "/bin/true")); !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "no systemd user manager") {
		t.Errorf("Spawn on this machine = %v; want bad_request saying the helper has no systemd user manager", err)
	}
	list, err := c.List(t.Context())
	if err != nil || len(list.Sessions) != 0 {
		t.Errorf("List = %+v, %v; want no session", list, err)
	}
	if _, err := c.Status(t.Context(), "local"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Status(local) = %v; want not_found", err)
	}
	res, err := c.TeamStop(t.Context(), api.TeamStopArgs{Team: "demo", Short: "00000000", IfStopping: true})
	if err != nil || res.Job != "" || len(res.Stopped) != 0 {
		t.Errorf("TeamStop(if stopping) = %+v, %v; want no job, nothing stopped (a pod's SIGTERM is no stop of the team)", res, err)
	}
	if res, err := c.TeamStop(t.Context(), api.TeamStopArgs{Team: "demo", Short: "00000000"}); err != nil || len(res.Stopped) != 0 {
		t.Errorf("TeamStop = %+v, %v; want nothing stopped (no session anywhere)", res, err)
	}
}
