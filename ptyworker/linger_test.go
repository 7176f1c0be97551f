package ptyworker

import (
	"testing"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestWatchAfterExit: a watch that comes while the worker lingers after
// its agent ended (its socket still serves) gets the exit event, as an
// attach does, and the worker does not wait out ExitLinger for it. The
// helper watches every worker as soon as its unit is active, so an agent
// that exits within milliseconds of its start is watched only after it
// ended; before, each such run lingered the whole ExitLinger (3 s), so a
// session that exits at once and should hit its start limit of 2 starts
// in 1 s never did.
func TestWatchAfterExit(t *testing.T) {
	tw, _, stalled := lingeringWorker(t)

	c := tw.dial()
	if err := c.Input(ctxT(t), []byte("go\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to end", func() bool {
		in, err := c.Info(ctxT(t))
		return err == nil && in.Exit != nil
	})

	late := tw.dial()
	s := follow(late, 0, 0)
	in, err := late.Watch(ctxT(t))
	if err != nil {
		t.Fatalf("watch after the exit: %v", err)
	}
	if in.Exit == nil || in.Exit.Code != 3 {
		t.Errorf("watch after the exit answered exit %+v; want code 3", in.Exit)
	}
	waitFor(t, "the exit event on the watch made after the exit", func() bool { return s.exitInfo() != nil })

	// Now only the stalled attachment holds the worker; once it goes, the
	// worker ends, ExitLinger (a minute) or not.
	stalled.nc.Close()
	tw.wait() // fails the test if the worker is still running after waitTimeout
}

// lingeringWorker starts a worker (ExitLinger a minute) whose agent, once
// it reads a line, writes more than the socket buffers hold and exits 3,
// with a client attached that reads nothing from then on: once the agent
// ended, the worker lingers until that client is closed.
func lingeringWorker(t *testing.T) (*testWorker, *proto.Spec, *rawConn) {
	t.Helper()
	spec := testSpec(t, "sh", "-c", `read x; head -c 600000 /dev/zero | tr '\0' x; exit 3`)
	tw := startWorker(t, spec, Options{ExitLinger: time.Minute})
	stalled := tw.raw()
	stalled.hello(spec)
	stalled.request(2, proto.MethodAttach, proto.AttachParams{})
	if m := stalled.next(); m == nil || m.Error != nil {
		t.Fatalf("attach: %+v", m)
	}
	return tw, spec, stalled
}
