package service

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/legion-dev/legion/controller"
)

// maxWakeReason bounds what is read of the wake file for the log.
const maxWakeReason = 256

// followWake wakes the loop whenever someone replaces the team's wake
// file, path (team.WakeFile: the dashboard does on every verified GitHub
// webhook delivery), and logs the reason it holds. It returns when ctx
// ends (see fileWatch.follow). Polling at the interval stays the
// fallback: a wake that is missed (the controller stopped, inotify
// unavailable) only delays the tick.
//
// A tracker that answers from its last board while its cheap probe sees
// no change (github.Tracker) forgets that board first: a delivery says
// something changed, and the woken tick must read it.
func followWake(ctx context.Context, path string, tracker controller.Tracker, wake chan<- struct{}, log *slog.Logger) {
	fileWatch{path: path, what: "the wake file", woken: func() {
		if f, ok := tracker.(interface{ Forget() }); ok {
			f.Forget()
		}
		log.Info("woken", "by", wakeReason(path))
	}}.follow(ctx, wake, log)
}

// wakeReason is the first line of the wake file at path, at most
// maxWakeReason bytes; "" when it cannot be read (it was replaced again
// in between, and the next event reads that one).
func wakeReason(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, maxWakeReason)).ReadString('\n')
	return strings.TrimSpace(line)
}
