package confine_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/confine"
)

// TestMain makes the test binary the trampoline, as the worker's program is.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == confine.ProbeFlag {
		os.Exit(confine.ProbeMain(os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == confine.ExecFlag {
		code, err := confine.Exec(os.Args[1:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// needLandlock fails (CI) or skips a test on a kernel without the ABI.
func needLandlock(t *testing.T) {
	t.Helper()
	if st := confine.Probe(); !st.Holds {
		if os.Getenv("CI") == "true" {
			t.Fatalf("sandbox does not hold: %s", st.Why)
		}
		t.Skipf("sandbox does not hold: %s", st.Why)
	}
}

// run runs a shell command confined to sb; it returns its output and
// whether it exited 0.
func run(t *testing.T, sb *api.Sandbox, script string) (string, bool) {
	t.Helper()
	fd, flags, err := confine.Ruleset(sb)
	if err != nil {
		t.Fatalf("Ruleset: %v", err)
	}
	f := os.NewFile(uintptr(fd), "ruleset")
	defer f.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := confine.Command(self, flags, []string{"sh", "-c", script})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func TestConfined(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	for _, d := range []string{"home/work", "home/.ssh", "home/other", "home/state/legion/agents/s1", "home/state/legion/specs", "home/cache"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"home/.ssh/id_x", "home/.bashrc", "home/other/file", "home/state/legion/specs/other.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sb := &api.Sandbox{
		Write:    []string{filepath.Join(home, "work"), filepath.Join(home, "state/legion/agents/s1"), filepath.Join(home, "cache"), filepath.Join(home, "newcache")},
		MakeDirs: []string{filepath.Join(home, "newcache")},
		Read:     []string{"/"},
		Hide:     []string{filepath.Join(home, ".ssh"), filepath.Join(home, "state/legion")},
	}
	allowed := []struct{ name, script string }{
		{"write the worktree", "echo ok > work/f && cat work/f"},
		{"write its own state below a hidden dir", "echo ok > state/legion/agents/s1/f"},
		{"write a cache", "mkdir -p cache/go-build && echo ok > cache/go-build/x"},
		{"write a cache made for it", "echo ok > newcache/x"},
		{"read the rest of the home", "cat .bashrc other/file"},
		{"list the home", "ls -a . | grep -q bashrc"},
		{"list ~/.ssh (names only)", "ls .ssh | grep -q id_x"},
		{"read the system", "cat /etc/passwd >/dev/null"},
		{"write /dev/null", "echo x > /dev/null"},
		{"rename between its own dirs", "mkdir -p work/a work/b && echo x > work/a/f && mv work/a/f work/b/f"},
	}
	for _, c := range allowed {
		t.Run(c.name, func(t *testing.T) {
			if out, ok := run(t, sb, "cd "+home+" && "+c.script); !ok {
				t.Errorf("%s: failed, want success: %s", c.script, out)
			}
		})
	}
	denied := []struct{ name, script string }{
		{"write the home", "echo x >> .bashrc"},
		{"create in the home", "echo x > newfile"},
		{"write ~/.ssh", "echo x > .ssh/x"},
		{"read ~/.ssh/id_x", "cat .ssh/id_x"},
		{"read another session's spec", "cat state/legion/specs/other.json"},
		{"write another tree", "echo x > other/file"},
		{"remove from the home", "rm .bashrc"},
		{"write /etc", "echo x > /etc/legion-sandbox-test"},
		{"move a secret out", "mv .ssh/id_x work/"},
		{"read through a symlink", "ln -s " + filepath.Join(home, ".ssh") + " work/l && cat work/l/id_x"},
	}
	for _, c := range denied {
		t.Run(c.name, func(t *testing.T) {
			out, ok := run(t, sb, "cd "+home+" && "+c.script)
			if ok {
				t.Errorf("%s: succeeded, want it refused", c.script)
			} else if !strings.Contains(out, "ermission denied") {
				t.Errorf("%s: failed without 'Permission denied': %s", c.script, out)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(home, ".bashrc")); err != nil || string(b) != "secret\n" {
		t.Errorf(".bashrc = %q, %v; want it untouched", b, err)
	}
}

// TestInferred: the ABI inferred without Landlock's system calls (as the
// seccomp-filtered controller must) agrees with the kernel's own answer.
func TestInferred(t *testing.T) {
	got, want := confine.Inferred(), confine.Probe()
	if got.Holds != want.Holds || got.ABI != want.ABI {
		t.Errorf("inferred %+v; the kernel says %+v", got, want)
	}
}

// TestProbeChild: the probe through a child (as a seccomp-filtered
// process asks) answers as the process itself would.
func TestProbeChild(t *testing.T) {
	if got, want := confine.ProbeChild(), confine.Probe(); got != want {
		t.Errorf("through a child %+v; itself %+v", got, want)
	}
}
