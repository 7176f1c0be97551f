package workerunit

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func goldenSpec() *proto.Spec {
	return &proto.Spec{
		Version: proto.SpecVersion, SessionID: "0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c",
		Name: "ENG-12 implement", Team: "core 100%", TeamShort: "0123abcd", Issue: "ENG-12", Mode: "implement",
		Cwd: "/home/u/src/app", ArgvNew: []string{"claude"},
		Token: "secret-token-never-in-units", DaemonInstanceID: "d1",
		Paths: proto.Paths{RuntimeDir: "/run/user/1000/legion", StateDir: "/home/u/.local/state/legion"},
		Unit:  "legion-0123abcd-ENG\\x2d12-implement.service",
	}
}

func goldenPolicy() Policy {
	return Policy{
		Binary: "/usr/libexec/legion/legion-pty-worker", SpecPath: "/home/u/.local/state/legion/specs/0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c.json",
		Cooldown: 30 * time.Second, Watchdog: 90 * time.Second, StartLimitBurst: 5,
		StartLimitInterval: 20 * time.Minute, StopTimeout: 15 * time.Second,
	}
}

func TestTransientGolden(t *testing.T) {
	u, err := Transient(goldenSpec(), goldenPolicy())
	if err != nil {
		t.Fatal(err)
	}
	got := u.File()
	path := filepath.Join("testdata", "worker.service.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Transient unit file mismatch (-want +got):\n%s", diff)
	}
}

func TestTransientProperties(t *testing.T) {
	s := goldenSpec()
	u, err := Transient(s, goldenPolicy())
	if err != nil {
		t.Fatal(err)
	}
	props, err := u.Properties()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]dbus.Variant{}
	for _, p := range props {
		got[p.Name] = p.Value
		if strings.Contains(p.Value.String(), s.Token) {
			t.Errorf("property %s holds the control token", p.Name)
		}
	}
	// D-Bus types matter: systemd refuses a uint64 property sent as int.
	wantTypes := map[string]string{
		"Type": "s", "NotifyAccess": "s", "Restart": "s", "KillMode": "s", "Slice": "s", "Description": "s",
		"RestartUSec": "t", "WatchdogUSec": "t", "TimeoutStopUSec": "t", "StartLimitIntervalUSec": "t",
		"StartLimitBurst": "u", "ExecStart": "a(sasb)", "Environment": "as",
	}
	for name, sig := range wantTypes {
		v, ok := got[name]
		if !ok {
			t.Errorf("property %s missing", name)
			continue
		}
		if v.Signature().String() != sig {
			t.Errorf("property %s has D-Bus type %s; want %s", name, v.Signature(), sig)
		}
	}
	checks := map[string]any{
		"Type": "notify", "NotifyAccess": "main", "Restart": "on-failure", "KillMode": "mixed",
		"Slice": "legion-0123abcd.slice", "RestartUSec": uint64(30e6), "WatchdogUSec": uint64(90e6),
		"StartLimitBurst": uint32(5),
	}
	for name, want := range checks {
		if v := got[name].Value(); v != want {
			t.Errorf("property %s = %v; want %v", name, v, want)
		}
	}
	if _, err := Transient(s, Policy{Binary: "legion", SpecPath: "/x"}); err == nil {
		t.Error("TransientUnit with a relative binary and no policy = nil error")
	}
	bad := *s
	bad.Unit = "not a unit"
	if _, err := Transient(&bad, goldenPolicy()); err == nil {
		t.Error("TransientUnit with a bad unit name = nil error")
	}
}

// TestTransientVerifies checks the unit-file rendering with
// systemd-analyze verify (the transient properties are the same options).
func TestTransientVerifies(t *testing.T) {
	_, err := exec.LookPath("systemd-analyze")
	sdtest.Require(t, "systemd-analyze (Debian package systemd) on $PATH", err == nil)
	dir := t.TempDir()
	bin := filepath.Join(dir, proto.BinaryName)
	os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	p := goldenPolicy()
	p.Binary = bin
	u, err := Transient(goldenSpec(), p)
	if err != nil {
		t.Fatal(err)
	}
	unitDir := filepath.Join(dir, "units")
	os.Mkdir(unitDir, 0o755)
	if err := os.WriteFile(filepath.Join(unitDir, u.Name), u.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	runtime := filepath.Join(dir, "run")
	os.Mkdir(runtime, 0o700)
	cmd := exec.Command("systemd-analyze", "--user", "verify", "--", u.Name)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime, "SYSTEMD_UNIT_PATH="+unitDir+":")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s\nunit:\n%s", u.Name, err, &stderr, u.File())
	}
}
