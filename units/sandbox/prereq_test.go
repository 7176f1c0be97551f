package sandbox

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckPrereqsNotRoot(t *testing.T) {
	for _, uid := range []int{1000, 65534} {
		_, err := checkPrereqs(uid)
		var missing *MissingError
		if !errors.As(err, &missing) {
			t.Fatalf("checkPrereqs(%d) = %v; want a *MissingError", uid, err)
		}
		for _, want := range []string{"running as root", "uid " + itoa(uid)} {
			if !strings.Contains(missing.What, want) {
				t.Errorf("checkPrereqs(%d) = %q; want it to say %q", uid, missing.What, want)
			}
		}
	}
}

// TestStartNotRoot: Start in a process that is not root fails with a
// *MissingError and makes nothing.
func TestStartNotRoot(t *testing.T) {
	require(t, "running as root (to run a helper as nobody)", os.Geteuid() == 0)
	// A copy of the test binary that nobody can run, and a parent dir for
	// the sandbox that nobody could write to if it tried.
	dir, err := os.MkdirTemp("", "sbt-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base")
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SANDBOX_TEST_HELPER=start", "SANDBOX_TEST_DIR="+base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	t.Logf("Start as nobody: %s", out)
	want := "missing=true err=start private systemd user manager: prerequisite missing: running as root"
	if !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "uid 65534") {
		t.Errorf("Start as nobody printed %q; want it to start with %q and name uid 65534", out, want)
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("Start as nobody made %s; want nothing", e.Name())
	}
}

func TestStartBadName(t *testing.T) {
	for _, name := range []string{"a/b", "../x", "-x", "x-", ".x", "x y", "x$y", strings.Repeat("x", 33)} {
		t.Run(name, func(t *testing.T) {
			s, err := Start(t.Context(), Options{Dir: t.TempDir(), Name: name})
			var missing *MissingError
			if err == nil || errors.As(err, &missing) || !strings.Contains(err.Error(), "sandbox name") {
				t.Errorf("Start(Name %q) = %v, %v; want an error about the name", name, s, err)
			}
			if s != nil {
				s.Stop(t.Context())
			}
		})
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
