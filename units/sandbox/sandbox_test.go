package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/internal/waitfor"
)

func TestStartStop(t *testing.T) {
	requirePrereqs(t)
	base := shortDir(t)
	home := os.Getenv("HOME")
	s := startSandbox(t, Options{Dir: base, Name: testName})

	if got, want := filepath.Dir(s.Dir), base; got != want {
		t.Errorf("parent of Dir %s = %s; want %s", s.Dir, got, want)
	}
	if !strings.HasPrefix(filepath.Base(s.Dir), fmt.Sprintf("%s-%d-", testName, os.Getpid())) {
		t.Errorf("Dir = %s; want it named %s-PID-RANDOM", s.Dir, testName)
	}
	for _, dir := range []string{s.Dir, s.RuntimeDir} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("mode of %s = %v; want 0700", dir, perm)
		}
	}
	wantVars := []string{
		"XDG_RUNTIME_DIR=" + s.Dir + "/run",
		"DBUS_SESSION_BUS_ADDRESS=unix:path=" + s.Dir + "/run/bus",
		"HOME=" + s.Dir + "/home",
		"XDG_CONFIG_HOME=" + s.Dir + "/home/.config",
		"XDG_STATE_HOME=" + s.Dir + "/home/.local/state",
		"XDG_DATA_HOME=" + s.Dir + "/home/.local/share",
		"XDG_CACHE_HOME=" + s.Dir + "/home/.cache",
	}
	if diff := cmp.Diff(wantVars, s.Vars()); diff != "" {
		t.Errorf("Vars() mismatch (-want +got):\n%s", diff)
	}
	if got := os.Getenv("HOME"); got != home {
		t.Errorf("after Start, this process's HOME = %q; want it unchanged, %q", got, home)
	}
	var homes []string
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			homes = append(homes, v)
		}
	}
	if diff := cmp.Diff([]string{s.Home}, homes); diff != "" {
		t.Errorf("HOME entries in Env mismatch (-want +got):\n%s", diff)
	}

	ctx := t.Context()
	out, err := s.Systemctl(ctx, "show", "--property=Version", "--value")
	if err != nil {
		t.Fatalf("systemctl show: %v", err)
	}
	if strings.TrimSpace(out) == "" {
		t.Errorf("systemctl --user show --property=Version printed nothing")
	}
	// The manager answers on the session bus too (go-systemd's
	// NewUserConnection path).
	if ok, err := busHasManager(ctx, s.BusAddress); err != nil || !ok {
		t.Errorf("busHasManager(%s) = %v, %v; want true, nil", s.BusAddress, ok, err)
	}
	unit, err := startSleeper(ctx, s, "sbt-probe")
	if err != nil {
		t.Fatal(err)
	}

	managerPID, cgroups := s.proc.Pid, append([]string(nil), s.cgroups...)
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, managerPID, s.Dir, cgroups, unit)
	if err := s.Stop(ctx); err != nil {
		t.Errorf("second Stop = %v; want nil", err)
	}
	if !strings.Contains(s.Log(), "Startup finished") {
		t.Errorf("Log() after Stop does not say \"Startup finished\":\n%s", s.Log())
	}
}

// TestStopCancelled: Stop with a context that is already done kills at
// once and still cleans up everything.
func TestStopCancelled(t *testing.T) {
	requirePrereqs(t)
	s := startSandbox(t, Options{Dir: shortDir(t), Name: testName})
	unit, err := startSleeper(t.Context(), s, "sbt-probe")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	managerPID, cgroups := s.proc.Pid, append([]string(nil), s.cgroups...)
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop(cancelled context) = %v; want nil", err)
	}
	assertGone(t, managerPID, s.Dir, cgroups, unit)
}

// TestStartCancelled: a start that cannot finish removes what it made.
func TestStartCancelled(t *testing.T) {
	p := requirePrereqs(t)
	base := shortDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s, err := Start(ctx, Options{Dir: base, Name: testName})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start(cancelled context) = %v, %v; want context.Canceled", s, err)
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("after a failed Start, %s holds %s; want nothing", base, e.Name())
	}
	for _, h := range p.layout.Hierarchies {
		matches, err := filepath.Glob(filepath.Join(h.Parent, fmt.Sprintf("%s-%d-*", testName, os.Getpid())))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			t.Errorf("after a failed Start, cgroup %s exists; want it removed", m)
		}
	}
}

// TestManagersIsolated starts two sandboxes and a unit in the first: the
// second does not see it, stopping the second leaves it running, and
// stopping the first leaves no process, cgroup or directory behind.
func TestManagersIsolated(t *testing.T) {
	requirePrereqs(t)
	base := shortDir(t)
	a := startSandbox(t, Options{Dir: base, Name: testName})
	b := startSandbox(t, Options{Dir: base, Name: testName})
	ctx := t.Context()

	pid, err := startSleeper(ctx, a, "sbt-probe")
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := b.Systemctl(ctx, "show", "--property=LoadState", "--value", "sbt-probe.service"); strings.TrimSpace(out) != "not-found" {
		t.Errorf("LoadState of A's unit in manager B = %q; want not-found", strings.TrimSpace(out))
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	nameA, nameB := filepath.Base(a.Dir), filepath.Base(b.Dir)
	if !strings.Contains(string(cg), "/"+nameA+"/app.slice/sbt-probe.service") || strings.Contains(string(cg), nameB) {
		t.Errorf("cgroups of A's unit process = %s; want below %s only", cg, nameA)
	}

	managerB, cgroupsB := b.proc.Pid, append([]string(nil), b.cgroups...)
	if err := b.Stop(ctx); err != nil {
		t.Fatalf("Stop B: %v", err)
	}
	assertGone(t, managerB, b.Dir, cgroupsB)
	if !running(pid) {
		t.Fatalf("stopping manager B ended process %d of manager A", pid)
	}

	managerA, cgroupsA := a.proc.Pid, append([]string(nil), a.cgroups...)
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop A: %v", err)
	}
	assertGone(t, managerA, a.Dir, cgroupsA, pid)
}

// TestLog: what the manager logs, and what units print, ends up in Log and
// Options.Log, not on the machine's console.
func TestLog(t *testing.T) {
	requirePrereqs(t)
	var copied syncBuffer
	s := startSandbox(t, Options{Dir: shortDir(t), Name: testName, Log: &copied})
	run := exec.Command("systemd-run", "--user", "--unit=sbt-fail", "--quiet", "sh", "-c", "echo hello from the unit; exit 3")
	run.Env = s.Env
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("systemd-run: %v: %s", err, out)
	}
	wants := []string{"hello from the unit\n", "sbt-fail.service: Failed with result 'exit-code'.\n"}
	for _, want := range wants {
		waitfor.True(t, waitTimeout, fmt.Sprintf("%q in the manager's log", want), func() bool { return strings.Contains(s.Log(), want) })
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Stop returns only after the copy to Options.Log is done.
	for _, want := range wants {
		if !strings.Contains(copied.String(), want) {
			t.Errorf("Options.Log got no %q; got:\n%s", want, copied.String())
		}
	}
}

// TestStartFails: when the manager does not come up, Start's error quotes
// its log, and nothing Start made is left.
func TestStartFails(t *testing.T) {
	p := requirePrereqs(t)
	base := shortDir(t)
	fake := filepath.Join(base, "systemd")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"fake systemd refuses: $*\" >&2\nexit 3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	p.systemd = fake
	s, err := start(t.Context(), Options{Dir: base, Name: testName}, func() (prereqs, error) { return p, nil })
	if err == nil {
		s.Stop(t.Context())
		t.Fatal("start with a failing systemd succeeded")
	}
	t.Logf("start with a failing systemd: %v", err)
	for _, want := range []string{"manager exited during startup", "fake systemd refuses: --user"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start with a failing systemd = %v; want it to say %q", err, want)
		}
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "systemd" {
			t.Errorf("after a failed start, %s holds %s; want nothing", base, e.Name())
		}
	}
	for _, h := range p.layout.Hierarchies {
		matches, err := filepath.Glob(filepath.Join(h.Parent, fmt.Sprintf("%s-%d-*", testName, os.Getpid())))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			t.Errorf("after a failed start, cgroup %s exists; want it removed", m)
		}
	}
}
