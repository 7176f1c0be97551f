package kubetest

import (
	"strings"
	"testing"
)

// TestStartEndsWhenAComponentExits: a component that exits (here the API
// server, on an unknown flag) ends Start at once with an error that names
// it and quotes its log, instead of a wait for readiness until the deadline.
func TestStartEndsWhenAComponentExits(t *testing.T) {
	bin := binaries(t)
	c := &Cluster{Dir: t.TempDir(), extraArgs: map[string][]string{"kube-apiserver": {"--no-such-flag"}}}
	err := c.start(t, bin)
	if err == nil {
		t.Fatal("start with an API server that cannot start = nil; want an error")
	}
	for _, want := range []string{"kube-apiserver (pid", "exited", "kube-apiserver.log", "no-such-flag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start = %v; want it to contain %q", err, want)
		}
	}
}
