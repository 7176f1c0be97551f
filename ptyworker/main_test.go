package ptyworker

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/legion-dev/legion/agent/kinds"
)

// TestMain gives the agents these tests start the signal dispositions a
// worker under systemd gives them. An ignored signal stays ignored across
// exec, and a test binary started under nohup, or in the background of a
// non-interactive shell, has SIGHUP or SIGINT ignored: its in-process
// workers' agents then ignored the SIGHUP that ends them, and
// TestWatchdogFedWhileFreshTriggeredWhenStale failed. A notified signal
// is caught instead, and exec resets a caught signal to the default.
// (legion-pty-worker does the same for SIGHUP and SIGINT in RunSpecFile.)
//
// With LEGION_TEST_HOOK_RELAY=1 the test binary is `legion hook` instead
// (RelayHook): the agents of hook tests run it as Claude Code runs its
// hook command. With LEGION_TEST_DIALOG it is one of Claude Code's
// dialogs (fakeDialog).
func TestMain(m *testing.M) {
	if d := os.Getenv(envTestDialog); d != "" {
		fakeDialog(d)
		os.Exit(0)
	}
	if os.Getenv(envTestHookRelay) == "1" {
		if err := RelayHook(context.Background(), os.Stdin, os.Stdout, os.Getenv, kinds.HookDialect); err != nil {
			fmt.Fprintln(os.Stderr, "legion", err)
		}
		os.Exit(0)
	}
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT} {
		if signal.Ignored(sig) {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	os.Exit(m.Run())
}

// envTestHookRelay makes the test binary RelayHook (see TestMain).
const envTestHookRelay = "LEGION_TEST_HOOK_RELAY"
