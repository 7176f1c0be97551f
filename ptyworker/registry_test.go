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

// TestEndRecordedBeforeAnnounced: when clients are told that the run
// ended, the registry already says so. A worker killed -9 in between is
// restarted by systemd and reads the registry: had it said running, the
// restart would resume a phase the controller had already moved past
// (the chaos run, seed 202).
func TestEndRecordedBeforeAnnounced(t *testing.T) {
	spec := testSpec(t, "cat")
	var seen *proto.Registry
	var err error
	tw := startWorker(t, spec, Options{beforeAnnounceEnd: func() { seen, err = proto.ReadRegistry(spec.RegistryPath()) }})
	tw.cancel()
	tw.wait()
	if err != nil || seen.State != proto.StateStopped || seen.LastExit == nil {
		t.Errorf("registry when the end was announced = %+v, %v; want state %s with the last exit", seen, err, proto.StateStopped)
	}
}
