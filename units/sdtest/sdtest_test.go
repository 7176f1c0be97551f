package sdtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
)

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
}

// TestCleanup: once the test that called Start is over, the manager's
// directory is gone and the environment is back.
func TestCleanup(t *testing.T) {
	home := os.Getenv("HOME")
	var dir string
	t.Run("start", func(t *testing.T) {
		dir = Start(t).Dir
	})
	if dir == "" {
		t.Skip("the subtest did not start a manager")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the test, stat %s: %v; want not exist", dir, err)
	}
	if got := os.Getenv("HOME"); got != home {
		t.Errorf("after the test, HOME = %q; want %q", got, home)
	}
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
		waitfor.True(t, 30*time.Second, fmt.Sprintf("%q in the manager's log", want), func() bool { return strings.Contains(m.Log(), want) })
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
	w := WorkerBinary(t)
	if filepath.Dir(w) != filepath.Dir(bin) {
		t.Errorf("WorkerBinary = %q; want it beside %q", w, bin)
	}
	out, err = exec.Command(w, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "legion-pty-worker ") {
		t.Fatalf("%s --version: %v: %q; want \"legion-pty-worker VERSION\"", w, err, out)
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
		{fmt.Sprintf("%s%d-123", binPrefix, dead), true},
		{fmt.Sprintf("%s%d-123", binPrefix, os.Getpid()), false},
		{fmt.Sprintf("%s%d-123", binPrefix, 1), false},
		{fmt.Sprintf("other-%d-123", dead), false},
		{binPrefix + "x-123", false},
		{binPrefix + "123", false},
	}
	for _, tt := range tests {
		if got := staleName(tt.name, binPrefix); got != tt.want {
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
