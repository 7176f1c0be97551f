package ptyworker

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestIdentity: every line the worker logs carries the session's journal
// attributes (internal/journal turns them into LEGION_TEAM, LEGION_ISSUE,
// LEGION_MODE, LEGION_SESSION and LEGION_UNIT); LEGION_SESSION is the
// agent conversation's session, a retro's the implementer's.
func TestIdentity(t *testing.T) {
	tests := []struct {
		name string
		spec proto.Spec
		want string
	}{{
		name: "retro",
		spec: proto.Spec{Team: "web", Name: "WEB-1-retro", Issue: "WEB-1", Mode: "retro", Unit: "legion-0a1b2c3d-web-1-retro.service",
			SessionID: "11111111-1111-5111-8111-111111111111", AgentSession: "22222222-2222-5222-8222-222222222222"},
		want: "level=INFO msg=x team=web session=22222222-2222-5222-8222-222222222222 name=WEB-1-retro issue=WEB-1 mode=retro unit=legion-0a1b2c3d-web-1-retro.service\n",
	}, {
		name: "spawned, no issue",
		spec: proto.Spec{Team: "web", Name: "shell", SessionID: "11111111-1111-5111-8111-111111111111", Unit: "legion-0a1b2c3d-shell.service"},
		want: "level=INFO msg=x team=web session=11111111-1111-5111-8111-111111111111 name=shell unit=legion-0a1b2c3d-shell.service\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))
			identity(log, &tt.spec).Info("x")
			if got := b.String(); got != tt.want {
				t.Errorf("identity(%+v) logs %q; want %q", tt.spec, got, tt.want)
			}
		})
	}
}
