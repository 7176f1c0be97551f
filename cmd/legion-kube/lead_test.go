package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// Two `legion-kube lead` processes with one Lease, each running a command
// that writes its start and its end: the commands never overlap (the log
// alternates), each exits with its command's status. A lead process
// killed with SIGKILL takes its command with it: no controller decides on
// without the Lease.
func TestLead(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1})
	bin := sdtest.KubeBinary(t)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log")
	leadCmd := func(script string) *exec.Cmd {
		cmd := exec.Command(bin, "lead", "--kubeconfig", c.Kubeconfig, "--namespace", "default", "--name", "legion-controller-0123abcd",
			"--", "sh", "-c", script)
		cmd.Stderr = os.Stderr
		return cmd
	}
	script := fmt.Sprintf(`echo "start $$" >> %[1]s; sleep 2; echo "end $$" >> %[1]s; exit 3`, logFile)
	a, b := leadCmd(script), leadCmd(script)
	for _, cmd := range []*exec.Cmd{a, b} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	for _, cmd := range []*exec.Cmd{a, b} {
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("legion-kube lead = %v; want exit status 3, the command's", err)
		}
	}
	b2, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(strings.ReplaceAll(string(b2), "\n", " "))
	if len(lines) != 8 || lines[0] != "start" || lines[2] != "end" || lines[4] != "start" || lines[6] != "end" || lines[1] != lines[3] || lines[5] != lines[7] || lines[1] == lines[5] {
		t.Errorf("log %q: want one command's start and end, then the other's", b2)
	}

	pidFile := filepath.Join(dir, "pid")
	k := leadCmd(fmt.Sprintf(`echo $$ > %s.tmp; mv %[1]s.tmp %[1]s; exec sleep 600`, pidFile))
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	waitfor.Check(t, time.Minute, "the led command to start", func() error {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	k.Process.Kill()
	k.Wait()
	waitfor.Check(t, 10*time.Second, "the command of a killed lead process to end", func() error {
		if err := syscall.Kill(child, 0); err == syscall.ESRCH {
			return nil
		}
		return fmt.Errorf("pid %d lives", child)
	})
}
