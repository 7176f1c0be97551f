package demo

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/units"
)

// TestDropIn: the demo's drop-in is rendered by units, so its
// Environment= keeps a '$' single (systemd expands no variables there;
// units' own tests check what a real manager makes of it). The demo's
// hand-written drop-in quoted it like an Exec word, doubling the '$', and
// the controller was pointed at a config path that does not exist.
func TestDropIn(t *testing.T) {
	f := dropIn(`legion@demo-1.service`, "/opt/my bin/legion", "/home/a$b/50%/legion.toml")
	if want := `legion@demo-1.service.d/60-demo.conf`; f.Path != want {
		t.Errorf("drop-in path = %q; want %q", f.Path, want)
	}
	want := units.Header + `

[Service]
Environment=LEGION_CONFIG=/home/a$b/50%%/legion.toml
ExecStart=
ExecStart="/opt/my bin/legion" controller --interval 2s %i
`
	if diff := cmp.Diff(want, string(f.Data)); diff != "" {
		t.Errorf("drop-in (-want +got):\n%s", diff)
	}
}
