package demo

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/agent/claude/claudetest"
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
	out, demoPID := runDemo(t, ctx, bin, tmp, "--sandbox")
	for _, want := range []string{"all 3 issues are Done", "DEMO-1: Done", "DEMO-2: Done", "DEMO-3: Done", "systemctl --user status legion@demo.service"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}

	pid := strconv.Itoa(demoPID)
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

// TestDemoOnUserManager runs `legion demo` on a user manager of its own
// (sdtest's: HOME and the XDG dirs in a temp dir, as a user's would be)
// whose state dir and ~/.claude/projects already hold files of an ended
// session of another team, and checks that afterwards both hold exactly
// what they held before: none of the demo's registry, spec, transcript or
// session files is left, and the other files, the daemon id among them,
// are untouched. (A live registry entry of a session whose unit is gone
// would be pruned to registry/pruned by the demo's helper, as by any
// helper's start: the demo shares the user's state dir.)
func TestDemoOnUserManager(t *testing.T) {
	m := sdtest.Start(t)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	state := filepath.Join(os.Getenv("XDG_STATE_HOME"), "legion")
	dotClaude := filepath.Join(m.Home, ".claude")
	const other = "0b6f3c1e-5d2a-4f7b-9c8d-1e2f3a4b5c6d"
	entry := `{"version":1,"session_id":"` + other + `","name":"WEB-1-implement","team":"web"}`
	for p, data := range map[string]string{
		filepath.Join(state, activation.DaemonIDFile):                           "5f0c9a7e-3b1d-4e2f-8a6b-7c9d0e1f2a3b\n",
		filepath.Join(state, "registry", "pruned", other+".json"):               entry,
		filepath.Join(state, "specs", other+".json"):                            entry,
		filepath.Join(state, "transcripts", other+".log"):                       "the web team's agent\n",
		filepath.Join(dotClaude, "projects", "-home-u-src-web", other+".jsonl"): "{}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := tree(t, state, dotClaude)

	out, _ := runDemo(t, ctx, bin, t.TempDir())
	if !strings.Contains(out, "using your systemd user manager") || !strings.Contains(out, "all 3 issues are Done") {
		t.Fatalf("legion demo did not run on the user manager to the end")
	}
	if diff := cmp.Diff(before, tree(t, state, dotClaude)); diff != "" {
		t.Errorf("files under %s and %s after the demo differ from before (-before +after):\n%s", state, dotClaude, diff)
	}
}

// TestDemoDeniedUserNamespaces: `legion demo` on a user manager that may
// not create user namespaces (sdtest's seccomp filter, as Ubuntu 24.04's
// AppArmor restriction): every unit with PrivateUsers=yes would fail with
// 217/USER, so the demo leaves it out, says why and how to lift it, and
// all three issues still reach Done.
func TestDemoDeniedUserNamespaces(t *testing.T) {
	sdtest.StartWith(t, sdtest.Options{DenyUserNamespaces: true})
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, _ := runDemo(t, ctx, bin, t.TempDir())
	for _, want := range []string{"note: left out PrivateUsers (user namespaces)", "217/USER", "apparmor_restrict_unprivileged_userns", "all 3 issues are Done"} {
		if !strings.Contains(out, want) {
			t.Errorf("legion demo's output does not say %q", want)
		}
	}
}

// tree lists every file and directory below roots, with a file's content.
func tree(t *testing.T, roots ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				got[p+"/"] = ""
				return nil
			}
			data, err := os.ReadFile(p)
			got[p] = string(data)
			return err
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	return got
}

// runDemo runs `legion demo --no-tty --timeout 3m` with args and TMPDIR
// tmp, logs its output and fails the test if it fails. It returns the
// output and the demo's PID.
func runDemo(t *testing.T, ctx context.Context, bin, tmp string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"demo", "--no-tty", "--timeout", "3m"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("legion demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("legion demo: %v", err)
	}
	return out.String(), cmd.Process.Pid
}

// TestDemoClaude runs `legion demo --agent claude` (the real Claude Code
// CLI against the demo's fake Anthropic API, on a private manager): every
// issue reaches Done through all five phases, each phase's worker ended
// by Legion once its work was done.
func TestDemoClaude(t *testing.T) {
	sdtest.Require(t, "root (the demo starts a private systemd manager)", os.Geteuid() == 0)
	cli := claudetest.Binary(t)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Setenv(EnvClaudeCode, cli)
	out, _ := runDemo(t, ctx, bin, t.TempDir(), "--sandbox", "--agent", "claude")
	for _, want := range []string{"Claude Code " + ClaudeCodeVersion + " against a local fake", "all 3 issues are Done", "DEMO-1: Done", "DEMO-2: Done", "DEMO-3: Done"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}
