package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// PodCLI is the installed agent CLI bin (…/VERSION/node_modules/.bin/NAME,
// as scripts/install-agent-clis lays it out) where a pod's user can run
// it, for Options.PodBinds: VERSION's tree linked file by file (cp -al)
// into a 0755 directory of its own, since the cache under root's home is
// 0700 (a real node has the CLI from the image). It returns the binary's
// path there; the directory to bind is PodCLIDir of it.
func PodCLI(t testing.TB, bin string) string {
	t.Helper()
	binDir := filepath.Dir(bin)
	if filepath.Base(binDir) != ".bin" || filepath.Base(filepath.Dir(binDir)) != "node_modules" {
		t.Fatalf("%s: want an installed CLI at VERSION/node_modules/.bin/NAME (scripts/install-agent-clis)", bin)
	}
	version := filepath.Dir(filepath.Dir(binDir))
	dir, err := os.MkdirTemp("", "legion-pod-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-al", version, dir).CombinedOutput(); err != nil {
		t.Fatalf("cp -al %s %s: %v\n%s", version, dir, err, out)
	}
	rel, err := filepath.Rel(version, bin)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, filepath.Base(version), rel)
}

// PodCLIDir is the directory PodCLI made for the binary at path, to bind
// into the pods.
func PodCLIDir(path string) string {
	return filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(path))))
}
