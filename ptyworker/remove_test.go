package ptyworker

import (
	"errors"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestRemoveAfterExit sends remove once the agent has exited with a
// failure, while the worker still serves (it lingers for a client that has
// not read its exit event yet). The remove must be refused as
// session_not_running, or else honoured: a remove answered {} and then
// ignored left the registry saying exited and Run failing, so systemd
// restarted a session that was told to go away.
func TestRemoveAfterExit(t *testing.T) {
	tw, spec, stalled := lingeringWorker(t)
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Watch(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Input(ctxT(t), []byte("go\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the exit event", func() bool { return s.exitInfo() != nil })

	removeErr := c.Remove(ctxT(t))
	stalled.nc.Close() // the worker stops lingering
	runErr := tw.wait()
	r, err := proto.ReadRegistry(spec.RegistryPath())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case proto.IsCode(removeErr, proto.CodeSessionNotRunning):
		var ee *ExitError
		if !errors.As(runErr, &ee) || ee.Exit.Code != 3 || r.State != proto.StateExited {
			t.Errorf("remove refused; Run() = %v, registry state %q; want the agent's exit 3 and %q", runErr, r.State, proto.StateExited)
		}
	case removeErr == nil:
		if runErr != nil || r.State != proto.StateRemoved {
			t.Errorf("remove after the exit answered {}; then Run() = %v, registry state %q; want nil and %q (or the remove refused as %s)",
				runErr, r.State, proto.StateRemoved, proto.CodeSessionNotRunning)
		}
	default:
		t.Errorf("Remove() after the exit = %v; want %s (the worker was still serving)", removeErr, proto.CodeSessionNotRunning)
	}
}
