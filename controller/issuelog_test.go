package controller

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
)

// namingDispatcher is a Dispatcher that names sessions (SessionNamer) and
// does nothing else.
type namingDispatcher struct{}

func (namingDispatcher) Dispatch(context.Context, string, Mode) error                  { return nil }
func (namingDispatcher) Respond(context.Context, string, string, string, string) error { return nil }
func (namingDispatcher) End(context.Context, string, string) error                     { return nil }
func (namingDispatcher) SessionOf(issue string, mode Mode) (string, string) {
	return "sess-" + issue + "-" + string(mode), "legion-0a1b2c3d-" + issue + "-" + string(mode) + ".service"
}

// plainDispatcher is a Dispatcher that names nothing.
type plainDispatcher struct{}

func (plainDispatcher) Dispatch(context.Context, string, Mode) error                  { return nil }
func (plainDispatcher) Respond(context.Context, string, string, string, string) error { return nil }
func (plainDispatcher) End(context.Context, string, string) error                     { return nil }

// TestIssueLogger: the controller's lines about an issue carry its issue,
// the worker's mode, and with a SessionNamer the worker's session and unit
// (the journal fields LEGION_ISSUE, LEGION_MODE, LEGION_SESSION,
// LEGION_UNIT).
func TestIssueLogger(t *testing.T) {
	tests := []struct {
		name string
		disp Dispatcher
		d    Decision
		is   Issue
		want string
	}{
		{"dispatch", namingDispatcher{}, Decision{Issue: "WEB-1", Action: ActionDispatchImplementer, Mode: ModeImplement}, Issue{ID: "WEB-1"},
			"msg=x issue=WEB-1 mode=implement session=sess-WEB-1-implement unit=legion-0a1b2c3d-WEB-1-implement.service\n"},
		{"the live worker's mode", namingDispatcher{}, Decision{Issue: "WEB-1", Action: ActionEndWorker}, Issue{ID: "WEB-1", Worker: &Worker{Mode: ModeReview}},
			"msg=x issue=WEB-1 mode=review session=sess-WEB-1-review unit=legion-0a1b2c3d-WEB-1-review.service\n"},
		{"no worker", namingDispatcher{}, Decision{Issue: "WEB-1", Action: ActionNone, MoveTo: StatusDone}, Issue{ID: "WEB-1"},
			"msg=x issue=WEB-1\n"},
		{"a dispatcher that names nothing", plainDispatcher{}, Decision{Issue: "WEB-1", Mode: ModePlan}, Issue{ID: "WEB-1"},
			"msg=x issue=WEB-1 mode=plan\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
					return slog.Attr{}
				}
				return a
			}}))
			issueLogger(log, tt.disp, tt.d, tt.is).Info("x")
			if got := b.String(); got != tt.want {
				t.Errorf("issueLogger(%+v) logs %q; want %q", tt.d, got, tt.want)
			}
		})
	}
}
