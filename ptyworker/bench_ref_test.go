package ptyworker

// Reference benchmarks: the figures of bench_test.go for tmux and dtach
// (Debian packages), measured in the same `make bench` run, so the worker's
// numbers can be read against what people use today:
//
//   - BenchmarkRefOutputThroughput/{tmux,dtach}: MB/s at which the output of
//     `cat FILE` (32 MiB, the same file as BenchmarkOutputThroughput) reaches
//     a real client attached on a PTY, against the raw PTY read of the same
//     command, and their ratio; five interleaved pairs per iteration. tmux
//     re-renders its screen for the client instead of forwarding bytes, so
//     its clock stops when an end marker printed after the file shows up on
//     the client's PTY.
//   - BenchmarkRefKeystrokeEcho/{tmux,dtach}: round trip of one keystroke
//     written to the client's PTY through `stty raw -echo; cat` inside,
//     against the same round trip on a direct PTY; p50/p99 and the added
//     latency.
//   - BenchmarkRefIdleRSS/{tmux,dtach}: VmRSS of the tmux server and of the
//     dtach master process with an idle `cat` inside (the child is not
//     counted, as the worker's figure does not count its agent).
//
// Every tmux server runs with its own socket (-L, under a temporary
// TMUX_TMPDIR) and no configuration (-f /dev/null) and is killed at the end;
// dtach masters run in the foreground (-N), so their PID is ours to end.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// refTools are the reference programs, by the name each benchmark reports.
var refTools = []string{"tmux", "dtach"}

// refEnv is the environment of reference servers and clients: no enclosing
// tmux, a terminal type tmux knows, and tmux sockets under dir.
func refEnv(dir string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "TMUX") || strings.HasPrefix(kv, "TERM=")
	})
	return append(env, "TERM=xterm-256color", "TMUX_TMPDIR="+dir)
}

// refSession is one reference server hosting a command, with a client
// attached on a PTY of ours once attach has run.
type refSession struct {
	b      *testing.B
	tool   string
	env    []string
	sock   string    // tmux: -L name; dtach: socket path
	pid    int       // tmux server or dtach master
	master *exec.Cmd // dtach only: the foreground master
	client *direct
}

// startRef starts tool's server hosting argv, detached, and returns once it
// accepts clients. b.Cleanup ends it.
func startRef(b *testing.B, tool string, argv ...string) *refSession {
	b.Helper()
	dir := b.TempDir()
	s := &refSession{b: b, tool: tool, env: refEnv(dir)}
	b.Cleanup(s.stop)
	switch tool {
	case "tmux":
		s.sock = fmt.Sprintf("legion-bench-%d", os.Getpid())
		args := append([]string{"new-session", "-d", "-s", "s", "-x", "80", "-y", "24"}, argv...)
		s.tmux(args...)
		s.tmux("set-option", "-g", "status", "off")
		out := s.tmux("display-message", "-p", "-t", "s", "#{pid}")
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			b.Fatalf("tmux server pid: %q: %v", out, err)
		}
		s.pid = pid
	case "dtach":
		s.sock = filepath.Join(dir, "dtach.sock")
		args := append([]string{"-N", s.sock, "-E", "-r", "none", "-z"}, argv...)
		s.master = exec.Command("dtach", args...)
		s.master.Env = s.env
		if err := s.master.Start(); err != nil {
			b.Fatalf("start dtach: %v", err)
		}
		s.pid = s.master.Process.Pid
		waitfor.True(b, waitTimeout, "dtach socket "+s.sock, func() bool {
			fi, err := os.Stat(s.sock)
			return err == nil && fi.Mode().Type() == os.ModeSocket
		})
	default:
		b.Fatalf("unknown reference tool %q", tool)
	}
	return s
}

// tmux runs a tmux command against this session's server.
func (s *refSession) tmux(args ...string) string {
	s.b.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", s.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.b.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// attach starts a client on a PTY of ours (80x24).
func (s *refSession) attach() *direct {
	s.b.Helper()
	var argv []string
	switch s.tool {
	case "tmux":
		argv = []string{"tmux", "-L", s.sock, "-f", "/dev/null", "attach-session", "-t", "s"}
	case "dtach":
		argv = []string{"dtach", "-a", s.sock, "-E", "-r", "none", "-z"}
	}
	c := startDirect(s.b, argv, s.env)
	s.client = c
	return c
}

// sync pings the hosted script (see refScript) until it answers through
// the client: the client is then attached and forwarding both ways. Pings
// are repeated because a client may drop input typed before it is ready.
func (s *refSession) sync() {
	s.b.Helper()
	deadline := time.Now().Add(waitTimeout)
	buf := make([]byte, 64<<10)
	var seen []byte
	for {
		if time.Now().After(deadline) {
			s.b.Fatalf("%s client: no READY within %v; got %q", s.tool, waitTimeout, lastBytes(seen))
		}
		if _, err := s.client.ptm.Write([]byte("ping\n")); err != nil {
			s.b.Fatalf("%s client: write: %v", s.tool, err)
		}
		s.client.ptm.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		for {
			n, err := s.client.ptm.Read(buf)
			seen = append(seen, buf[:n]...)
			if bytes.Contains(seen, []byte("READY")) {
				s.client.ptm.SetReadDeadline(time.Time{})
				return
			}
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				s.b.Fatalf("%s client: read: %v; got %q", s.tool, err, lastBytes(seen))
			}
		}
	}
}

// stop ends the client, what runs inside and the server, all by PID or by
// this session's own socket.
func (s *refSession) stop() {
	switch s.tool {
	case "tmux":
		if s.pid > 0 {
			cmd := exec.Command("tmux", "-L", s.sock, "-f", "/dev/null", "kill-server")
			cmd.Env = s.env
			cmd.Run() // error: the server is already gone
			waitGone(s.pid)
		}
	case "dtach":
		if s.master != nil {
			for _, pid := range childPIDs(s.pid) {
				syscall.Kill(-pid, syscall.SIGKILL) // the hosted command leads its own session
			}
			s.master.Process.Signal(syscall.SIGTERM)
			s.master.Wait()
			s.master = nil
		}
	}
	s.pid = 0
	if s.client != nil {
		s.client.killAll(syscall.SIGKILL)
		s.client.close()
		s.client = nil
	}
}

// waitGone waits for pid to exit, killing it when it outlives the deadline.
func waitGone(pid int) {
	err := waitfor.Until(waitTimeout, fmt.Sprintf("process %d to exit", pid), func() error {
		if syscall.Kill(pid, 0) == nil {
			return errors.New("still there")
		}
		return nil
	})
	if err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// childPIDs lists pid's children.
func childPIDs(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func lastBytes(b []byte) []byte { return b[max(0, len(b)-200):] }

// refScript wraps body: answer each "ping" line with READY until a "go"
// line, then run body. The markers are assembled by printf so the hosted
// command line itself never contains them.
func refScript(body string) string {
	return `while IFS= read -r l; do [ "$l" = go ] && break; printf 'RE%sDY\n' A; done; ` + body
}

// refEndMarker is printed after the benchmark output; no output line
// contains it.
const refEndMarker = "LEGIONBENCHEND"

// readUntil reads r until marker appears or the deadline passes.
func readUntil(r *os.File, marker []byte, timeout time.Duration) error {
	r.SetReadDeadline(time.Now().Add(timeout))
	defer r.SetReadDeadline(time.Time{})
	buf := make([]byte, 64<<10)
	var window []byte
	for {
		n, err := r.Read(buf)
		window = append(window, buf[:n]...)
		if bytes.Contains(window, marker) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read until %q: %w; last bytes %q", marker, err, lastBytes(window))
		}
		window = window[max(0, len(window)-len(marker)):]
	}
}

func requireTool(b *testing.B, tool string) {
	b.Helper()
	_, err := exec.LookPath(tool)
	sdtest.Require(b, fmt.Sprintf("%s (Debian package %s; make check-deps installs it)", tool, tool), err == nil)
}

func BenchmarkRefOutputThroughput(b *testing.B) {
	for _, tool := range refTools {
		b.Run(tool, func(b *testing.B) {
			requireTool(b, tool)
			file := benchFile(b)
			rawArgv := []string{"sh", "-c", "read go; exec cat " + file}
			refArgv := []string{"sh", "-c", refScript(`cat "$1"; printf 'LEGION%sEND\n' BENCH; exec sleep 100000`), "sh", file}
			var rawBytes int64
			var rawTime, refTime time.Duration
			// Five raw/reference pairs per iteration, interleaved, as in
			// BenchmarkOutputThroughput.
			for range b.N * 5 {
				n, d := rawPTYRead(b, rawArgv)
				rawBytes += n
				rawTime += d

				s := startRef(b, tool, refArgv...)
				c := s.attach()
				s.sync()
				start := time.Now()
				if _, err := c.ptm.Write([]byte("go\n")); err != nil {
					b.Fatal(err)
				}
				if err := readUntil(c.ptm, []byte(refEndMarker), 5*time.Minute); err != nil {
					b.Fatalf("%s client: %v", tool, err)
				}
				// The same number of bytes as the raw read (the file and
				// the echo of "go") was delivered.
				refTime += time.Since(start)
				s.stop()
			}
			rawRate := float64(rawBytes) / rawTime.Seconds() / 1e6
			refRate := float64(rawBytes) / refTime.Seconds() / 1e6
			b.ReportMetric(rawRate, "raw-MB/s")
			b.ReportMetric(refRate, tool+"-MB/s")
			b.ReportMetric(refRate/rawRate, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// echoRoundTrips writes one key echoSamples times to w and waits for its
// echo on each.
func echoRoundTrips(b *testing.B, f *os.File) []time.Duration {
	b.Helper()
	key := []byte{'k'}
	buf := make([]byte, 4096)
	out := make([]time.Duration, 0, echoSamples)
	f.SetReadDeadline(time.Now().Add(5 * time.Minute))
	defer f.SetReadDeadline(time.Time{})
	for range echoSamples {
		t0 := time.Now()
		if _, err := f.Write(key); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := f.Read(buf)
			if bytes.IndexByte(buf[:n], 'k') >= 0 {
				break
			}
			if err != nil {
				b.Fatalf("wait for echo: %v", err)
			}
		}
		out = append(out, time.Since(t0))
	}
	return out
}

func BenchmarkRefKeystrokeEcho(b *testing.B) {
	for _, tool := range refTools {
		b.Run(tool, func(b *testing.B) {
			requireTool(b, tool)
			directArgv := []string{"sh", "-c", "stty raw -echo; echo ready; exec cat"}
			refArgv := []string{"sh", "-c", "stty raw -echo; " + refScript("exec cat")}
			var direct, ref []time.Duration
			for range b.N {
				// Direct: write a byte to the master, read its echo.
				c := startDirect(b, directArgv, os.Environ())
				if err := readUntil(c.ptm, []byte("ready"), waitTimeout); err != nil {
					b.Fatal(err)
				}
				direct = append(direct, echoRoundTrips(b, c.ptm)...)
				c.killAll(syscall.SIGKILL)
				c.close()

				// Through the reference: the key into its client's PTY,
				// the echo out of it. tmux does not move the cursor around
				// a plain character, so the echo is the byte itself (or
				// follows a line feed when the screen scrolls); the status
				// line, which could contain the letter, is off.
				s := startRef(b, tool, refArgv...)
				cl := s.attach()
				s.sync()
				if _, err := cl.ptm.Write([]byte("go\n")); err != nil {
					b.Fatal(err)
				}
				ref = append(ref, echoRoundTrips(b, cl.ptm)...)
				s.stop()
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			d50, d99 := percentile(direct, 0.5), percentile(direct, 0.99)
			r50, r99 := percentile(ref, 0.5), percentile(ref, 0.99)
			b.ReportMetric(ms(d50), "direct-p50-ms")
			b.ReportMetric(ms(d99), "direct-p99-ms")
			b.ReportMetric(ms(r50), tool+"-p50-ms")
			b.ReportMetric(ms(r99), tool+"-p99-ms")
			b.ReportMetric(ms(r50-d50), "added-p50-ms")
			b.ReportMetric(ms(r99-d99), "added-p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func BenchmarkRefIdleRSS(b *testing.B) {
	for _, tool := range refTools {
		b.Run(tool, func(b *testing.B) {
			requireTool(b, tool)
			var rss, anon, file []int64
			for range b.N {
				s := startRef(b, tool, "cat")
				// Idle, as BenchmarkIdleWorkerRSS lets its worker be.
				time.Sleep(500 * time.Millisecond)
				st, err := procStatusKiB(s.pid, "VmRSS", "RssAnon", "RssFile")
				if err != nil {
					b.Fatal(err)
				}
				rss = append(rss, st[0])
				anon = append(anon, st[1])
				file = append(file, st[2])
				s.stop()
			}
			med := func(v []int64) float64 {
				slices.Sort(v)
				return float64(v[len(v)/2]) / 1024
			}
			b.ReportMetric(med(rss), "idle-RSS-MiB")
			b.ReportMetric(med(anon), "anon-MiB")
			b.ReportMetric(med(file), "file-MiB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
