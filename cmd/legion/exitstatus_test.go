package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestExitStatus runs the legion binary and checks its exit status against
// legion(1): 0 success, 1 failure, 2 bad flags or arguments.
func TestExitStatus(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	sandboxXDG(t)
	tests := []struct {
		name   string
		args   []string
		noHome bool // run with PATH only: help must not need legion.toml
		code   int
		stderr string
	}{
		{"version", []string{"version"}, false, exitOK, ""},
		{"legion alone prints its help", nil, true, exitOK, ""},
		{"group alone prints its help", []string{"issue"}, true, exitOK, ""},
		{"unknown subcommand of a group", []string{"issue", "bogus"}, false, exitUsage, `unknown command "bogus" for "legion issue"`},
		{"unknown subcommand with a suggestion", []string{"sessions", "lst"}, false, exitUsage, "did you mean list?"},
		{"unknown top-level command", []string{"bogus"}, false, exitUsage, `unknown command "bogus" for "legion"`},
		{"unknown flag", []string{"--nope"}, false, exitUsage, "unknown flag: --nope"},
		{"argument to a command that takes none", []string{"doctor", "extra"}, false, exitUsage, `unknown command "extra" for "legion doctor"`},
		{"missing argument", []string{"state"}, false, exitUsage, "legion state: accepts 1 arg(s), received 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.CommandContext(t.Context(), bin, tt.args...)
			if tt.noHome {
				cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			}
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			code := 0
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("legion %s: exit status %d, stderr %q; want %d and stderr containing %q",
					strings.Join(tt.args, " "), code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
}

// TestExitStatusSignal runs the helper by hand and ends it with SIGINT
// (Ctrl-C: interrupted, 130, not a success) and with SIGTERM (systemd
// stopping it: a success).
func TestExitStatusSignal(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	m := sdtest.Start(t)
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGINT, exitInterrupted},
		{syscall.SIGTERM, exitOK},
	} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			sock := filepath.Join(m.RuntimeDir, "h.sock")
			var stderr bytes.Buffer
			cmd := exec.Command(bin, "helper", "--socket", sock)
			cmd.Env, cmd.Stderr = m.Env, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// The helper answers once it has set up its signal handling.
			if err := waitfor.Until(time.Minute, "legion helper to listen on "+sock, func() error {
				select {
				case err := <-exited:
					t.Fatalf("legion helper ended before it listened: %v\n%s", err, stderr.String())
				default:
				}
				c, err := net.Dial("unix", sock)
				if err == nil {
					c.Close()
				}
				return err
			}); err != nil {
				cmd.Process.Kill()
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-exited:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				t.Fatalf("legion helper still running a minute after %s", tt.sig)
			}
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != tt.code {
				t.Errorf("legion helper after %s: exit status %d (%v); want %d\n%s", tt.sig, code, err, tt.code, stderr.String())
			}
			os.Remove(sock)
		})
	}
}
