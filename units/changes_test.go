package units

import "testing"

func TestPathUnescape(t *testing.T) {
	for _, name := range []string{"legion-79a1ae52-sleeper-spawn.service", "legion@demo.service", "a_b.c", "1x"} {
		esc := string(unitObjectPath(name))[len(unitPathPrefix):]
		if got := pathUnescape(esc); got != name {
			t.Errorf("pathUnescape(%q) = %q; want %q", esc, got, name)
		}
	}
}
