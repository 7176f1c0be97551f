package demo

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/units/sdtest"
)

// TestDemo runs `legion demo --no-tty` (the real binary, with a private
// manager) and checks every issue reached Done and nothing is left: no
// process of the binary, no sandbox directory, no sandbox cgroup.
func TestDemo(t *testing.T) {
	sdtest.Require(t, "root (the demo starts a private systemd manager)", os.Geteuid() == 0)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "demo", "--no-tty", "--sandbox", "--timeout", "3m")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("legion demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("legion demo: %v", err)
	}
	for _, want := range []string{"all 3 issues are Done", "DEMO-1: Done", "DEMO-2: Done", "DEMO-3: Done", "systemctl --user status legion@demo.service"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}

	pid := strconv.Itoa(cmd.Process.Pid)
	// The sandbox and the temp dir are gone.
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
	// A long TMPDIR sends the sandbox to /tmp.
	if left, _ := filepath.Glob("/tmp/legion-demo-" + pid + "-*"); len(left) > 0 {
		t.Errorf("sandbox dirs left: %v", left)
	}
	// No cgroup of the demo's sandbox (named legion-demo-PID-*) is left.
	filepath.WalkDir("/sys/fs/cgroup", func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		if strings.HasPrefix(e.Name(), "legion-demo-"+pid+"-") {
			t.Errorf("cgroup left behind: %s", p)
			return fs.SkipDir
		}
		return nil
	})
	// No process runs the binaries (helper, controller, workers, agents).
	worker := sdtest.WorkerBinary(t)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe"))
		if err == nil && (exe == bin || exe == worker) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
			t.Errorf("process %s still runs %s: %s", p.Name(), exe, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}
