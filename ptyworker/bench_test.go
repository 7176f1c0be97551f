package ptyworker

// Benchmarks: what the worker costs over a bare PTY. `make bench` runs
// them once each (-benchtime 1x); every figure is reported with
// b.ReportMetric so one run prints the comparison:
//
//   - BenchmarkOutputThroughput: MB/s of `cat FILE` (32 MiB) read straight
//     from a PTY and received by an attached client through the worker (a
//     mapped attach, as `legion attach` and the dashboard make; see
//     ringmap.go), and
//     their ratio (target >= 0.95 on a quiet machine): of all bytes over all
//     time ("ratio"), and the median of the pairs' own ratios ("ratio-p50",
//     which one unlucky raw run moves less); sixteen interleaved pairs per
//     iteration. Every byte read raw must reach the client ("missing-bytes"
//     is 0, else the run fails). The CPU time each side spends per MB
//     ("raw-cpu-ms/MB": the raw reader; "worker-cpu-ms/MB" and
//     "client-cpu-ms/MB": the worker process and the attached client) and
//     "cpu-x", what the relay costs over the raw reader, tell where the time
//     goes. On a loaded machine MB/s says little; the CPU figures say more,
//     though the worker's grows with load too (more wake-ups per MB).
//     "raw-wakeups/MB", "worker-wakeups/MB" and "client-wakeups/MB" count
//     the times a thread of each went to sleep (voluntary context
//     switches), each paid for with a wake-up: the kernel hands PTY output
//     on in pieces of at most 4 KiB, so a reader that keeps up sleeps about
//     once per piece, 256 per MB, whatever it does with the bytes.
//     "raw-idle-%" and "worker-idle-%" are the share of the whole machine's
//     CPU time (all CPUs, from /proc/stat) that was idle during each side's
//     runs, and "raw-rest-cpu-ms/MB" and "worker-rest-cpu-ms/MB" the CPU
//     time per MB of everything but the reader (or the worker and client):
//     the agent (cat), the kernel's tty work (kworker, flush_to_ldisc),
//     and any other load. They tell whether the raw read left the relay
//     room: with little idle time during the raw runs (on 2 CPUs, cat and
//     the kernel's tty work take about three quarters of the machine), what
//     the relay spends beyond the raw reader is taken from the agent and
//     the kernel's tty work; more idle time during the worker's runs than
//     during the raw ones says the relay's path also waits (wake-ups)
//     rather than computes.
//   - BenchmarkOutputThroughputFrames: the same with a client that takes
//     data frames (rpc 1.1, or not amd64).
//   - BenchmarkOutputStalledClient: the same flood with a second client
//     attached that never reads: MB/s of the client that keeps up against
//     the raw read ("ratio"), and how many stalled clients were dropped
//     ("dropped", one per pair): the agent is not slowed by a client that
//     does not keep up, and the one that does loses nothing.
//   - BenchmarkKeystrokeEcho: round trip of one keystroke through
//     `stty raw -echo; cat`, direct and through the worker; p50/p99 of each
//     and what the worker adds (target: p99 added <= 0.2 ms).
//   - BenchmarkIdleWorkerRSS: VmRSS of a real legion-pty-worker process
//     (what units run) hosting an idle agent (target <= 8 MiB).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
	"golang.org/x/sys/unix"
)

const benchOutputSize = 32 << 20

// benchPairs is how many raw/worker pairs BenchmarkOutputThroughput runs
// per iteration.
const benchPairs = 16

// benchFile writes a text file of benchOutputSize bytes: numbered lines of
// printable text, like an agent's output.
func benchFile(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "output.txt")
	var buf bytes.Buffer
	for i := 0; buf.Len() < benchOutputSize; i++ {
		fmt.Fprintf(&buf, "%08d the quick brown fox jumps over the lazy dog; some \x1b[32mcolour\x1b[0m too\n", i)
	}
	// Synced, so the kernel's writeback of these 32 MiB is over before
	// anything is measured.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(buf.Bytes()[:benchOutputSize]); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// direct is a child on a PTY for the benchmarks' baselines and reference
// clients: its master as an *os.File in the Go runtime poller, as any Go
// program reading a PTY has it (the worker's own ptmx is left idle).
type direct struct {
	*child
	ptm *os.File
}

func startDirect(b *testing.B, argv, env []string) *direct {
	b.Helper()
	c, err := startChild(argv, "/", env, 80, 24, nil)
	if err != nil {
		b.Fatalf("start %s: %v", argv[0], err)
	}
	var fd int
	err = c.ptm.ioctl(func(master int) (err error) {
		fd, err = unix.FcntlInt(uintptr(master), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	d := &direct{child: c, ptm: os.NewFile(uintptr(fd), ptmxName)}
	b.Cleanup(func() { d.killAll(syscall.SIGKILL); d.close() }) // after a Fatal
	return d
}

// close closes both masters and collects the child; it may be called again.
func (d *direct) close() {
	d.ptm.Close()
	d.child.ptm.Close()
	d.reap()
}

// rawPTYRead runs argv on a PTY, writes go, and reads until the end of
// output; it returns the bytes read and how long that took.
func rawPTYRead(b *testing.B, argv []string) (int64, time.Duration) {
	n, d, _, _ := rawPTYReadCPU(b, argv)
	return n, d
}

// rawPTYReadCPU is rawPTYRead that also returns the CPU time this process
// (the reader) spent meanwhile, and the whole machine's.
func rawPTYReadCPU(b *testing.B, argv []string) (int64, time.Duration, time.Duration, benchreport.MachineTime) {
	b.Helper()
	c := startDirect(b, argv, os.Environ())
	buf := make([]byte, 64<<10)
	cpu0, m0 := selfCPU(b), benchreport.MachineNow(b)
	start := time.Now()
	if _, err := c.ptm.Write([]byte("go\n")); err != nil {
		b.Fatal(err)
	}
	var n int64
	for {
		k, err := c.ptm.Read(buf)
		n += int64(k)
		if err != nil {
			break
		}
	}
	d := time.Since(start)
	cpu, m := selfCPU(b)-cpu0, benchreport.MachineNow(b).Sub(m0)
	c.close()
	return n, d, cpu, m
}

// selfCPU is the CPU time (user and system) of this process so far.
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfWakeups is how many times a thread of this process went to sleep so
// far (voluntary context switches).
func selfWakeups(b *testing.B) int64 {
	b.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Nvcsw
}

// procWakeups is selfWakeups of every thread of process pid so far, from
// /proc/PID/task/*/status.
func procWakeups(b *testing.B, pid int) int64 {
	b.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("threads of process %d: %v", pid, err)
	}
	var sum int64
	for _, t := range tasks {
		s, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.Lines(string(s)) {
			v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatalf("%s: %q: %v", t, line, err)
			}
			sum += n
		}
	}
	return sum
}

// procCPU is the CPU time of every thread of process pid so far, from
// /proc/PID/task/*/schedstat (nanoseconds on CPU).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("threads of process %d: %v", pid, err)
	}
	var sum time.Duration
	for _, t := range tasks {
		s, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended; what it used is lost, a few µs
		}
		f := strings.Fields(string(s))
		if len(f) == 0 {
			b.Fatalf("%s: empty", t)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			b.Fatalf("%s: %q: %v", t, s, err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

func BenchmarkOutputThroughput(b *testing.B) {
	benchOutput(b, benchPairs, false, true)
}

func BenchmarkOutputThroughputFrames(b *testing.B) {
	benchOutput(b, benchPairs, false, false)
}

// BenchmarkOutputStalledClient attaches with data frames: that is the
// path on which a client that stops reading could cost the worker
// something (a full socket, its drop). A mapped client costs the worker a
// few bytes per batch whether it reads or not (TestMappedClientLapped).
func BenchmarkOutputStalledClient(b *testing.B) {
	benchOutput(b, 5, true, false)
}

// benchOutput runs pairs raw/worker pairs per iteration of `cat FILE` and
// reports the figures of BenchmarkOutputThroughput; with stalled, a second
// client that never reads is attached too (BenchmarkOutputStalledClient).
// With mapped the clients attach mapped, as `legion attach` and the helper
// do; without, they take data frames, as a client older than rpc 1.2 or
// one on another architecture does.
func benchOutput(b *testing.B, pairs int, stalled, mapped bool) {
	if mapped && !proto.RingMappable {
		b.Skip("mapped attach is for amd64 only")
	}
	file := benchFile(b)
	// The echo of "go" is part of the output in both runs.
	argv := []string{"sh", "-c", "read go; exec cat " + file}
	var rawBytes, wBytes, missing int64
	var rawTime, wTime, rawCPU, workerCPU, clientCPU time.Duration
	var pairRatios []float64
	var rawWakeups, workerWakeups, clientWakeups int64
	var rawMachine, wMachine benchreport.MachineTime
	dropped := 0
	// Raw/worker pairs, interleaved, so that load from elsewhere on the
	// machine weighs on both sides alike: on a small VM the raw figure
	// alone varies by half from one run to the next.
	for range b.N * pairs {
		runtime.GC() // neither side pays for the other's garbage
		rw0 := selfWakeups(b)
		n, d, cpu, m := rawPTYReadCPU(b, argv)
		rawWakeups += selfWakeups(b) - rw0
		rawMachine = rawMachine.Add(m)
		rawBytes += n
		rawTime += d
		rawCPU += cpu

		// The worker as units run it: a legion-pty-worker process, with
		// this process as the attached client. A ring (and so client
		// queue) of 8 MiB: this measures throughput, and a loaded test
		// machine can deschedule the client for longer than the default
		// 1 MiB lasts at PTY speed (the client would be dropped, as
		// designed; TestSlowClientDropped covers that).
		spec := testSpec(b, argv...)
		spec.RingSize = 8 << 20
		wp := startWorkerProcess(b, spec)
		c := wp.client
		if res, err := c.Attach(context.Background(), proto.AttachParams{Mapped: mapped}); err != nil || res.Mapped != mapped {
			b.Fatalf("attach (mapped %v): %+v, %v", mapped, res, err)
		}
		var stall *stallingClient
		if stalled {
			// Attached, then its connection is not read until the run is
			// over: its socket fills up and the worker drops it.
			stall = wp.dialStalling(b)
		}
		runtime.GC()
		wcpu0, ccpu0 := procCPU(b, wp.cmd.Process.Pid), selfCPU(b)
		ww0, cw0 := procWakeups(b, wp.cmd.Process.Pid), selfWakeups(b)
		m0 := benchreport.MachineNow(b)
		start := time.Now()
		if err := c.SendInput([]byte("go\n")); err != nil {
			b.Fatal(err)
		}
		// The clock stops at the last byte (as the raw read's does), not at
		// the exit event, which waits for the registry's fsync.
		var got int64
		var exit *proto.ExitInfo
		for ev := range c.Events() {
			switch ev.Kind {
			case proto.EventKindOutput:
				got += int64(len(ev.Data))
				if got == n {
					wd := time.Since(start)
					wTime += wd
					workerCPU += procCPU(b, wp.cmd.Process.Pid) - wcpu0
					clientCPU += selfCPU(b) - ccpu0
					workerWakeups += procWakeups(b, wp.cmd.Process.Pid) - ww0
					clientWakeups += selfWakeups(b) - cw0
					wMachine = wMachine.Add(benchreport.MachineNow(b).Sub(m0))
					pairRatios = append(pairRatios, float64(d)/float64(wd)) // same bytes: a ratio of rates
				}
				ev.Release() // as legion attach does once written out
			case proto.EventKindDesync:
				b.Fatalf("the benchmark client was dropped: %+v", ev.Desync)
			case proto.EventKindExit:
				exit = ev.Exit
			}
			if exit != nil {
				break
			}
		}
		wBytes += got
		missing += n - got
		if exit == nil || got != n {
			b.Fatalf("worker run: %d bytes, exit %+v; want %d bytes (as read raw) and an exit", got, exit, n)
		}
		if stall != nil {
			if stall.resume() {
				dropped++
			}
		}
		wp.stop()
	}
	mb := float64(rawBytes) / 1e6
	rawRate := mb / rawTime.Seconds()
	wRate := float64(wBytes) / 1e6 / wTime.Seconds()
	b.ReportMetric(rawRate, "raw-MB/s")
	b.ReportMetric(wRate, "worker-MB/s")
	b.ReportMetric(wRate/rawRate, "ratio")
	slices.Sort(pairRatios)
	b.ReportMetric(pairRatios[len(pairRatios)/2], "ratio-p50")
	b.ReportMetric(float64(missing), "missing-bytes")
	perMB := func(d time.Duration) float64 { return float64(d) / 1e6 / mb }
	b.ReportMetric(perMB(rawCPU), "raw-cpu-ms/MB")
	b.ReportMetric(perMB(workerCPU), "worker-cpu-ms/MB")
	b.ReportMetric(perMB(clientCPU), "client-cpu-ms/MB")
	b.ReportMetric(float64(workerCPU+clientCPU)/float64(rawCPU), "cpu-x")
	b.ReportMetric(rawMachine.IdlePercent(), "raw-idle-%")
	b.ReportMetric(wMachine.IdlePercent(), "worker-idle-%")
	b.ReportMetric(perMB(rawMachine.Busy-rawCPU), "raw-rest-cpu-ms/MB")
	b.ReportMetric(perMB(wMachine.Busy-workerCPU-clientCPU), "worker-rest-cpu-ms/MB")
	b.ReportMetric(float64(rawWakeups)/mb, "raw-wakeups/MB")
	b.ReportMetric(float64(workerWakeups)/mb, "worker-wakeups/MB")
	b.ReportMetric(float64(clientWakeups)/mb, "client-wakeups/MB")
	if stalled {
		b.ReportMetric(float64(dropped), "dropped")
	}
	b.ReportMetric(0, "ns/op")
}

// stallingClient is an attached client whose connection is not read (its
// reads wait) until resume.
type stallingClient struct {
	*proto.Client
	conn *stallConn
}

// stallConn is a connection whose reads wait while stalled.
type stallConn struct {
	net.Conn
	stalled atomic.Bool
	resumed chan struct{} // closed by resume
}

func (c *stallConn) Read(p []byte) (int, error) {
	if c.stalled.Load() {
		<-c.resumed
	}
	return c.Conn.Read(p)
}

// dialStalling connects a client that says hello, attaches and then stops
// reading.
func (wp *workerProcess) dialStalling(b *testing.B) *stallingClient {
	b.Helper()
	nc, err := net.Dial("unix", wp.spec.SocketPath())
	if err != nil {
		b.Fatal(err)
	}
	sc := &stallConn{Conn: nc, resumed: make(chan struct{})}
	c := proto.NewClient(sc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Hello(ctx, wp.spec.Token, wp.spec.DaemonInstanceID); err != nil {
		c.Close()
		b.Fatal(err)
	}
	if _, err := c.Attach(ctx, proto.AttachParams{}); err != nil {
		c.Close()
		b.Fatal(err)
	}
	sc.stalled.Store(true)
	return &stallingClient{Client: c, conn: sc}
}

// resume reads what the stalled client was sent, closes it and reports
// whether the worker dropped it (a desync event).
func (s *stallingClient) resume() bool {
	close(s.conn.resumed)
	dropped := false
	for ev := range s.Events() {
		if ev.Kind == proto.EventKindDesync {
			dropped = true
		}
		if ev.Kind == proto.EventKindExit {
			break
		}
	}
	s.Close()
	return dropped
}

// workerProcess is a legion-pty-worker process, as a unit runs it, with a
// client that has said hello.
type workerProcess struct {
	b      *testing.B
	spec   *proto.Spec
	cmd    *exec.Cmd
	client *proto.Client
}

// startWorkerProcess writes spec, starts the worker binary on it and
// connects as the helper does (hello, info).
func startWorkerProcess(b *testing.B, spec *proto.Spec) *workerProcess {
	b.Helper()
	specPath := filepath.Join(spec.Cwd, "spec.json")
	if err := proto.WriteSpec(specPath, spec); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(sdtest.WorkerBinary(b), "--spec", specPath)
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	wp := &workerProcess{b: b, spec: spec, cmd: cmd}
	err := waitfor.Until(waitTimeout, "worker of session "+spec.SessionID+" to answer", func() error {
		c, err := proto.Dial(context.Background(), spec.SocketPath())
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = c.Hello(ctx, spec.Token, spec.DaemonInstanceID)
		if err == nil {
			_, err = c.Info(ctx)
		}
		if err != nil {
			c.Close()
			return err
		}
		wp.client = c
		return nil
	})
	if err != nil {
		wp.stop()
		b.Fatal(err)
	}
	return wp
}

// stop ends the worker (SIGTERM, as systemd stops a unit) and waits for it.
func (wp *workerProcess) stop() {
	wp.b.Helper()
	if wp.client != nil {
		wp.client.Close()
	}
	wp.cmd.Process.Signal(syscall.SIGTERM)
	if err := wp.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			wp.b.Fatal(err)
		}
	}
}

const echoSamples = 2000

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func BenchmarkKeystrokeEcho(b *testing.B) {
	argv := []string{"sh", "-c", "stty raw -echo; echo ready; exec cat"}
	var direct, worker []time.Duration
	for range b.N {
		// Direct: write a byte to the master, read its echo.
		c := startDirect(b, argv, os.Environ())
		r := bufio.NewReader(c.ptm)
		if _, err := r.ReadString('\n'); err != nil { // "ready"
			b.Fatal(err)
		}
		key := []byte{'k'}
		for range echoSamples {
			t0 := time.Now()
			if _, err := c.ptm.Write(key); err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadByte(); err != nil {
				b.Fatal(err)
			}
			direct = append(direct, time.Since(t0))
		}
		c.killAll(syscall.SIGKILL)
		c.close()

		// Through the worker: a data frame in, the echo as an output event.
		spec := testSpec(b, argv...)
		tw := startWorker(b, spec, Options{Logger: discardLogger()})
		cl := tw.dial()
		if _, err := cl.Attach(context.Background(), proto.AttachParams{Offset: new(uint64)}); err != nil {
			b.Fatal(err)
		}
		for seen := ""; !strings.Contains(seen, "ready"); {
			ev := <-cl.Events()
			seen += string(ev.Data)
		}
		for range echoSamples {
			t0 := time.Now()
			if err := cl.SendInput(key); err != nil {
				b.Fatal(err)
			}
			for got := 0; got < 1; {
				ev, ok := <-cl.Events()
				if !ok {
					b.Fatal("worker connection closed")
				}
				if ev.Kind == proto.EventKindOutput {
					got += len(ev.Data)
				}
			}
			worker = append(worker, time.Since(t0))
		}
		cl.Close()
		tw.cancel()
		tw.wait()
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	d50, d99 := percentile(direct, 0.5), percentile(direct, 0.99)
	w50, w99 := percentile(worker, 0.5), percentile(worker, 0.99)
	b.ReportMetric(ms(d50), "direct-p50-ms")
	b.ReportMetric(ms(d99), "direct-p99-ms")
	b.ReportMetric(ms(w50), "worker-p50-ms")
	b.ReportMetric(ms(w99), "worker-p99-ms")
	b.ReportMetric(ms(w50-d50), "added-p50-ms")
	b.ReportMetric(ms(w99-d99), "added-p99-ms")
	b.ReportMetric(0, "ns/op")
}

func BenchmarkIdleWorkerRSS(b *testing.B) {
	var rss, anon, file []int64
	for range b.N {
		// A client does what a reconnecting helper does: hello, info.
		wp := startWorkerProcess(b, testSpec(b, "sleep", "100000"))
		wp.client.Close()
		wp.client = nil
		// Idle: let a few liveness ticks pass (no session file: 5s ticks
		// would be long; one STATUS tick has run at start).
		time.Sleep(500 * time.Millisecond)
		st, err := procStatusKiB(wp.cmd.Process.Pid, "VmRSS", "RssAnon", "RssFile")
		if err != nil {
			b.Fatal(err)
		}
		rss = append(rss, st[0])
		anon = append(anon, st[1])
		file = append(file, st[2])
		wp.stop()
	}
	med := func(v []int64) float64 {
		slices.Sort(v)
		return float64(v[len(v)/2]) / 1024
	}
	// VmRSS counts the pages of the legion binary this process maps
	// (RssFile; shared by every worker on the machine) and its own memory
	// (RssAnon).
	b.ReportMetric(med(rss), "idle-RSS-MiB")
	b.ReportMetric(med(anon), "anon-MiB")
	b.ReportMetric(med(file), "file-MiB")
	b.ReportMetric(0, "ns/op")
}

// procStatusKiB reads kB fields from /proc/<pid>/status.
func procStatusKiB(pid int, keys ...string) ([]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(keys))
	for i, k := range keys {
		found := false
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, k+":"); ok {
				f := strings.Fields(v)
				if out[i], err = strconv.ParseInt(f[0], 10, 64); err != nil {
					return nil, err
				}
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no %s line in /proc/%d/status", k, pid)
		}
	}
	return out, nil
}
