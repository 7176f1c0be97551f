package ptyworker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// A worker started on top of a corrupt registry quarantines it and goes on.
func TestWorkerQuarantinesCorruptRegistry(t *testing.T) {
	spec := testSpec(t, "cat")
	os.MkdirAll(proto.DirOf(spec.RegistryPath()), 0o700)
	os.WriteFile(spec.RegistryPath(), []byte("{not json"), 0o600)
	startWorker(t, spec, Options{})
	matches, _ := filepath.Glob(spec.RegistryPath() + ".corrupt-*")
	if len(matches) != 1 {
		t.Errorf("quarantined files = %v; want one", matches)
	}
}
