package ptyworker

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain gives the agents these tests start the signal dispositions a
// worker under systemd gives them. An ignored signal stays ignored across
// exec, and a test binary started under nohup, or in the background of a
// non-interactive shell, has SIGHUP or SIGINT ignored: its in-process
// workers' agents then ignored the SIGHUP that ends them, and
// TestWatchdogFedWhileFreshTriggeredWhenStale failed. A notified signal
// is caught instead, and exec resets a caught signal to the default.
// (legion-pty-worker does the same for SIGHUP and SIGINT in RunSpecFile.)
func TestMain(m *testing.M) {
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT} {
		if signal.Ignored(sig) {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	os.Exit(m.Run())
}
