package units

import (
	"testing"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

func TestPathUnescape(t *testing.T) {
	for _, name := range []string{"legion-79a1ae52-sleeper-spawn.service", "legion@demo.service", "a_b.c", "1x"} {
		esc := sddbus.PathBusEscape(name) // what systemd puts after unitPathPrefix
		if got := pathUnescape(esc); got != name {
			t.Errorf("pathUnescape(%q) = %q; want %q", esc, got, name)
		}
	}
}
