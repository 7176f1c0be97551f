package sdtest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitFor polls cond until it is true or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running reports whether pid is a live process (a zombie is not).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func TestStart(t *testing.T) {
	m := Start(t)

	for k, want := range map[string]string{
		"XDG_RUNTIME_DIR":          m.RuntimeDir,
		"DBUS_SESSION_BUS_ADDRESS": m.BusAddress,
		"HOME":                     m.Home,
		"XDG_CONFIG_HOME":          filepath.Join(m.Home, ".config"),
	} {
		if got := os.Getenv(k); got != want {
			t.Errorf("after Start, %s = %q; want %q", k, got, want)
		}
	}
	fi, err := os.Stat(m.RuntimeDir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("runtime dir mode = %v; want 0700", perm)
	}
	if _, err := os.Stat(filepath.Join(m.RuntimeDir, "systemd", "private")); err != nil {
		t.Errorf("private socket: %v", err)
	}

	out, err := m.Systemctl(t, "show", "--property=Version", "--value")
	if err != nil {
		t.Fatalf("systemctl show: %v", err)
	}
	if strings.TrimSpace(out) == "" {
		t.Errorf("systemctl --user show --property=Version printed nothing")
	}
	// The manager answers on the session bus too (go-systemd's
	// NewUserConnection path).
	ok, err := busHasManager(t.Context(), m.BusAddress)
	if err != nil || !ok {
		t.Errorf("busHasManager(%s) = %v, %v; want true, nil", m.BusAddress, ok, err)
	}
}

// TestManagersIsolated starts two managers and a unit in the first: the
// second does not see it, stopping the second leaves it running, and
// stopping the first leaves no process, cgroup or directory behind.
func TestManagersIsolated(t *testing.T) {
	systemdRun, err := exec.LookPath("systemd-run")
	Require(t, "systemd-run in PATH", err == nil)
	a := Start(t)
	b := Start(t)

	run := exec.Command(systemdRun, "--user", "--unit=sdtest-probe", "--quiet", "sleep", "infinity")
	run.Env = a.Env
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("systemd-run in manager A: %v: %s", err, out)
	}
	out, err := a.Systemctl(t, "show", "--property=MainPID", "--value", "sdtest-probe.service")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid == 0 {
		t.Fatalf("MainPID of sdtest-probe.service in A = %q; want a PID", out)
	}

	if out, _ := b.Systemctl(t, "show", "--property=LoadState", "--value", "sdtest-probe.service"); strings.TrimSpace(out) != "not-found" {
		t.Errorf("LoadState of A's unit in manager B = %q; want not-found", strings.TrimSpace(out))
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	nameA, nameB := filepath.Base(a.Dir), filepath.Base(b.Dir)
	if !strings.Contains(string(cg), "/"+nameA+"/app.slice/sdtest-probe.service") || strings.Contains(string(cg), nameB) {
		t.Errorf("cgroups of A's unit process = %s; want below %s only", cg, nameA)
	}

	b.close(t)
	assertGone(t, b)
	if !running(pid) {
		t.Fatalf("stopping manager B ended process %d of manager A", pid)
	}

	a.close(t)
	assertGone(t, a)
	waitFor(t, fmt.Sprintf("A's unit process %d to end", pid), func() bool { return !running(pid) })
}

// TestLog: what the manager logs, and what units print, ends up in Log,
// not on the machine's console.
func TestLog(t *testing.T) {
	systemdRun, err := exec.LookPath("systemd-run")
	Require(t, "systemd-run in PATH", err == nil)
	m := Start(t)
	run := exec.Command(systemdRun, "--user", "--unit=sdtest-fail", "--quiet", "sh", "-c", "echo hello from the unit; exit 3")
	run.Env = m.Env
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("systemd-run: %v: %s", err, out)
	}
	for _, want := range []string{"hello from the unit\n", "sdtest-fail.service: Failed with result 'exit-code'.\n"} {
		waitFor(t, fmt.Sprintf("%q in the manager's log", want), func() bool { return strings.Contains(m.Log(), want) })
	}
}

// assertGone checks that m's process, cgroups and directory are gone.
func assertGone(t *testing.T, m *Manager) {
	t.Helper()
	if running(m.pid) {
		t.Errorf("manager process %d still running after cleanup", m.pid)
	}
	for _, dir := range append([]string{m.Dir}, m.cgroups...) {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after cleanup, stat %s: %v; want not exist", dir, err)
		}
	}
}

func TestLegionBinary(t *testing.T) {
	bin := LegionBinary(t)
	if !filepath.IsAbs(bin) {
		t.Errorf("LegionBinary = %q; want an absolute path", bin)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
	if again := LegionBinary(t); again != bin {
		t.Errorf("second LegionBinary = %q; want %q (built once)", again, bin)
	}
}

func TestStaleName(t *testing.T) {
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := done.Process.Pid
	tests := []struct {
		name string
		want bool
	}{
		{fmt.Sprintf("%s%d-123", namePrefix, dead), true},
		{fmt.Sprintf("%s%d-123", namePrefix, os.Getpid()), false},
		{fmt.Sprintf("%s%d-123", namePrefix, 1), false},
		{fmt.Sprintf("other-%d-123", dead), false},
		{namePrefix + "x-123", false},
		{namePrefix + "123", false},
	}
	for _, tt := range tests {
		if got := staleName(tt.name, namePrefix); got != tt.want {
			t.Errorf("staleName(%q) = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestDeclaresModule(t *testing.T) {
	tests := []struct {
		gomod string
		want  bool
	}{
		{"module github.com/legion-dev/legion\n\ngo 1.26\n", true},
		{"// c\nmodule \"github.com/legion-dev/legion\"\n", true},
		{"module github.com/legion-dev/legion/v2\n", false},
		{"go 1.26\n", false},
	}
	for _, tt := range tests {
		if got := declaresModule([]byte(tt.gomod), modulePath); got != tt.want {
			t.Errorf("declaresModule(%q) = %v; want %v", tt.gomod, got, tt.want)
		}
	}
}
