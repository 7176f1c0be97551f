package sdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// modulePath is the module whose commands LegionBinary builds.
const modulePath = "github.com/legion-dev/legion"

// binPrefix names the directories LegionBinary builds into:
// legion-bin-<pid of the test process>-<random>.
const binPrefix = "legion-bin-"

// startEnv is the test process's environment before any Start changed HOME
// and XDG_CACHE_HOME: go build must use the real build cache.
var startEnv = os.Environ()

// startTempDir is the test process's temporary directory as it started,
// before any test pointed TMPDIR elsewhere (t.Setenv): where LegionBinary
// builds, whichever test asks first.
var startTempDir = os.TempDir()

var legion struct {
	once sync.Once
	path string
	err  error
}

// demoTag is the build tag that puts the demo and the scripted agent into
// legion (cmd/legion/demo.go; the Makefile's demo target).
const demoTag = "demo"

// workerName is the worker program beside legion (proto.BinaryName;
// this package cannot import ptyworker, whose tests use it).
const workerName = "legion-pty-worker"

// denyName is the test tool beside them: units/sdtest/denyuserns.
const denyName = "denyuserns"

// LegionBinary builds ./cmd/legion and ./cmd/legion-pty-worker (and the test
// tool units/sdtest/denyuserns) once per test
// process, as `make demo` does (static, CGO_ENABLED=0, with the demo build
// tag), and returns the absolute path of legion; the worker is beside it,
// where legion looks for it (see WorkerBinary).
//
// The tag adds to legion only `legion demo` and the hidden `legion
// scripted-agent`, the stand-in for Claude Code that the tests' agents
// run (internal/layout checks that it changes nothing else); the shipped
// legion, as `make build` builds it, has neither.
//
// The binaries go into a fresh directory $TMPDIR/legion-bin-<pid>-*, with
// the TMPDIR the test process started with: the first test to ask may
// have pointed TMPDIR into a directory of its own (the agent-CLI tests put
// it below ~/.cache, out of a sandbox's writable /tmp), and the binaries,
// shared by every test of the process, must not land where only that test
// expects (a Kubernetes test's pods, run as another user, bind them and
// must reach them; /root is 0700). A test
// process cannot remove it when it exits (there is no hook after the last
// test without a TestMain), so instead each process, on its first build,
// removes the directories of earlier test processes that are gone: at most
// one stale copy per finished process lingers until the next run.
func LegionBinary(t testing.TB) string {
	t.Helper()
	legion.once.Do(func() { legion.path, legion.err = buildLegion() })
	if legion.err != nil {
		t.Fatalf("build legion binary: %v", legion.err)
	}
	return legion.path
}

// WorkerBinary is LegionBinary's legion-pty-worker: what worker units run.
func WorkerBinary(t testing.TB) string {
	t.Helper()
	return filepath.Join(filepath.Dir(LegionBinary(t)), workerName)
}

func buildLegion() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("find the go tool: %w", err)
	}
	sweepStaleDirs(startTempDir, binPrefix)
	dir, err := os.MkdirTemp(startTempDir, binPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-tags", demoTag, "-o", dir+"/", "./cmd/legion", "./cmd/"+workerName, "./units/sdtest/"+denyName)
	cmd.Dir = root
	cmd.Env = append(startEnv[:len(startEnv):len(startEnv)], "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir) // nothing useful in it
		return "", fmt.Errorf("go build -tags %s ./cmd/legion ./cmd/%s ./units/sdtest/%s in %s: %w\n%s", demoTag, workerName, denyName, root, err, out.String())
	}
	return filepath.Join(dir, "legion"), nil
}

// moduleRoot walks up from the working directory (a test runs in its
// package's directory) to the go.mod of this module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			if declaresModule(b, modulePath) {
				return dir, nil
			}
			return "", fmt.Errorf("%s/go.mod is not module %s", dir, modulePath)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func declaresModule(gomod []byte, path string) bool {
	for line := range strings.Lines(string(gomod)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}

// sweepStaleDirs removes directories below base named prefix<pid>-... whose
// test process is gone (it died before its cleanup ran).
func sweepStaleDirs(base, prefix string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && staleName(e.Name(), prefix) {
			_ = os.RemoveAll(filepath.Join(base, e.Name())) // best effort
		}
	}
}

// staleName reports whether name, made as prefix<pid>-<random>, was made by
// a test process that is gone.
func staleName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	err = unix.Kill(pid, 0) // signal 0 only checks; it sends nothing
	return err != nil && !errors.Is(err, unix.EPERM)
}

var kubeBin struct {
	once sync.Once
	err  error
}

// kubeName is the Kubernetes engine's program (activation/kube/wire's
// BinaryName).
const kubeName = "legion-kube"

// KubeBinary builds ./cmd/legion-kube beside LegionBinary's legion, where
// legion looks for it, once per test process, and returns its path. It is
// built only when a test asks: it links the Kubernetes client.
func KubeBinary(t testing.TB) string {
	t.Helper()
	dir := filepath.Dir(LegionBinary(t))
	kubeBin.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			kubeBin.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./cmd/"+kubeName)
		cmd.Dir = root
		cmd.Env = append(startEnv[:len(startEnv):len(startEnv)], "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			kubeBin.err = fmt.Errorf("go build ./cmd/%s in %s: %w\n%s", kubeName, root, err, out)
		}
	})
	if kubeBin.err != nil {
		t.Fatalf("build %s: %v", kubeName, kubeBin.err)
	}
	return filepath.Join(dir, kubeName)
}
