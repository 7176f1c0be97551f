package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/legion-dev/legion/internal/cgroups"
	"github.com/legion-dev/legion/internal/waitfor"
)

func itoa(i int) string { return strconv.Itoa(i) }

func TestStaleName(t *testing.T) {
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := done.Process.Pid
	const prefix = "legion-x-"
	tests := []struct {
		name string
		want bool
	}{
		{fmt.Sprintf("%s%d-123", prefix, dead), true},
		{fmt.Sprintf("%s%d-123", prefix, os.Getpid()), false},
		{fmt.Sprintf("%s%d-123", prefix, 1), false},
		{fmt.Sprintf("other-%d-123", dead), false},
		{fmt.Sprintf("%s%d-12a", prefix, dead), false},
		{fmt.Sprintf("%s%d-", prefix, dead), false},
		{fmt.Sprintf("%s7-%d-123", prefix, dead), false}, // a sandbox named legion-x-7
		{fmt.Sprintf("%s+%d-123", prefix, dead), false},
		{prefix + "x-123", false},
		{prefix + "123", false},
	}
	for _, tt := range tests {
		if got := cgroups.StaleName(tt.name, prefix); got != tt.want {
			t.Errorf("staleName(%q, %q) = %v; want %v", tt.name, prefix, got, tt.want)
		}
	}
}

// TestOwnerDies: when the process that started a sandbox is killed, its
// manager and units end by themselves, and the next sweep removes the dead
// sandbox's directory and cgroups but leaves a live sandbox alone.
func TestOwnerDies(t *testing.T) {
	p := requirePrereqs(t)
	base := shortDir(t)

	owner := exec.Command(os.Args[0])
	owner.Env = append(os.Environ(), "SANDBOX_TEST_HELPER=owner", "SANDBOX_TEST_DIR="+base)
	stdin, err := owner.StdinPipe() // the helper stops its sandbox when this closes
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := owner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	owner.Stderr = &stderr
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		owner.Process.Kill()
		owner.Wait()
		t.Fatalf("read the owner helper's report: %v\nstderr:\n%s", err, stderr.String())
	}
	var r ownerReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("owner helper's report %q: %v", line, err)
	}
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	owner.Wait() // killed: the error says so

	waitfor.True(t, waitTimeout, fmt.Sprintf("manager %d to exit after its owner died", r.PID), func() bool { return !running(r.PID) })
	waitfor.True(t, waitTimeout, fmt.Sprintf("unit process %d to end after its owner died", r.UnitPID), func() bool { return !running(r.UnitPID) })
	waitfor.True(t, waitTimeout, "the dead sandbox's cgroups to empty", func() bool {
		found, err := cgroups.Dirs(r.Cgroups).Members()
		return err == nil && len(found) == 0
	})
	if _, err := os.Stat(r.Dir); err != nil {
		t.Fatalf("the dead sandbox's dir before the sweep: %v; want it still there", err)
	}

	// A live sandbox of the same name in the same place: the sweep (which
	// Start runs) must leave it alone, and remove the dead one's leftovers.
	live := startSandbox(t, Options{Dir: base, Name: testName})
	sweepStale(base, testName, p.layout) // once more, now that live exists
	for _, d := range append([]string{r.Dir}, r.Cgroups...) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after the sweep, stat %s: %v; want not exist", d, err)
		}
	}
	for _, d := range append([]string{live.Dir}, live.cgroups...) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the sweep removed %s of a live sandbox: %v", d, err)
		}
	}
	if _, err := live.Systemctl(t.Context(), "is-system-running"); err != nil && !strings.Contains(err.Error(), "exit status") {
		t.Errorf("live sandbox after the sweep: %v", err)
	}
	if !running(live.proc.Pid) {
		t.Errorf("live sandbox's manager %d ended after the sweep", live.proc.Pid)
	}
}

// TestSweepLeavesOthers: the sweep does not remove what is not a dead
// sandbox of its name, even if named like one.
func TestSweepLeavesOthers(t *testing.T) {
	base := t.TempDir()
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := done.Process.Pid
	keep := []string{
		fmt.Sprintf("%s-%d-1", testName, os.Getpid()), // ours, live
		fmt.Sprintf("%s-%d-1", testName, 1),           // owner alive
		fmt.Sprintf("%s-x-%d-1", testName, dead),      // another name
		fmt.Sprintf("other-%d-1", dead),
	}
	gone := fmt.Sprintf("%s-%d-1", testName, dead)
	for _, name := range append(keep, gone) {
		if err := os.Mkdir(filepath.Join(base, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A file is not a sandbox dir either.
	file := fmt.Sprintf("%s-%d-2", testName, dead)
	if err := os.WriteFile(filepath.Join(base, file), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, file)
	if os.Geteuid() == 0 {
		// Someone else's directory, named like a dead sandbox.
		foreign := fmt.Sprintf("%s-%d-3", testName, dead)
		if err := os.Mkdir(filepath.Join(base, foreign), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(base, foreign), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, foreign)
	}

	sweepStale(base, testName, cgroups.Layout{})
	for _, name := range keep {
		if _, err := os.Lstat(filepath.Join(base, name)); err != nil {
			t.Errorf("sweep removed %s: %v", name, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(base, gone)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the sweep, stat %s: %v; want not exist", gone, err)
	}
}

// FuzzStaleName: directory names in a shared parent are outside input;
// only prefix + decimal PID + "-" + decimal digits may ever count as stale.
func FuzzStaleName(f *testing.F) {
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		fmt.Sprintf("%s-%d-123", testName, done.Process.Pid),
		testName + "-1-1", testName + "--1-1", testName + "-+5-1", testName + "-0x10-1",
		testName + "-99999999999999999999-1", testName + "-5-1-2", testName + "-5-",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !cgroups.StaleName(name, testName+"-") {
			return
		}
		rest := strings.TrimPrefix(name, testName+"-")
		pid, random, ok := strings.Cut(rest, "-")
		if !ok || !cgroups.AllDigits(pid) || !cgroups.AllDigits(random) {
			t.Errorf("staleName(%q) = true; want false (not NAME-PID-DIGITS)", name)
		}
		if n, err := strconv.Atoi(pid); err != nil || n <= 0 || n == os.Getpid() {
			t.Errorf("staleName(%q) = true for PID %q", name, pid)
		}
	})
}
