package activation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
)

// BenchmarkColdStartRecovery measures, with N live workers, how long the
// first `legion sessions list` takes after the helper was stopped: the
// CLI's start, socket activation, the helper's start, recovery of every
// worker (systemd's view + registry + hello/info each) and a coherent
// list with all N running. Target: 100 workers under 300 ms.
func BenchmarkColdStartRecovery(b *testing.B) {
	for _, n := range []int{25, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			e := startEnv(b)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			c, err := api.Dial(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var g errgroup.Group
			g.SetLimit(4)
			for i := range n {
				g.Go(func() error {
					_, err := c.Spawn(ctx, testLaunch(fmt.Sprintf("w%03d", i), "/bin/sleep", "100000"))
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatalf("spawn %d workers: %v", n, err)
			}
			c.Close()
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				e.stopHelper(ctx)
				b.StartTimer()
				t0 := time.Now()
				r := e.list(ctx)
				d := time.Since(t0)
				b.StopTimer()
				took = append(took, d)
				running := 0
				for _, s := range r.Sessions {
					if s.State == api.StateRunning {
						running++
					}
				}
				if running != n || r.Recovery.Recovered != n {
					b.Fatalf("list after a cold start: %d of %d running, counts %+v", running, n, r.Recovery)
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportMS(b, median(took), "ms/first-list")
			// The helper's own view: from its start to the end of recovery.
			if rec := recoveryTimes(e.helperLog, n); len(rec) > 0 {
				reportMS(b, median(rec), "ms/recovery")
			}
		})
	}
}

// BenchmarkSpawnVsSystemdRun measures `legion spawn` until the command
// runs (it touches a file; the clock stops when the file exists, whether
// or not the CLI has returned), against `systemd-run --user` of the same
// command in the same run, alternating, and reports the ratio of the
// medians. Target: at most 1.2. The helper is already running (a steady
// state: socket activation is paid once, not per spawn).
func BenchmarkSpawnVsSystemdRun(b *testing.B) {
	e := startEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	sdRun, err := exec.LookPath("systemd-run")
	if err != nil {
		b.Skip("systemd-run not found")
	}
	e.list(ctx) // start the helper
	dir, err := os.MkdirTemp("", "lgn-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const rounds = 21
	var legion, systemd []time.Duration
	b.ResetTimer()
	for i := range b.N * rounds {
		mark := func(kind string) string { return filepath.Join(dir, fmt.Sprintf("%s-%d", kind, i)) }
		script := func(f string) []string { return []string{"/bin/sh", "-c", "touch " + f + "; exec sleep 100000"} }

		f := mark("sd")
		d := timeUntil(b, f, exec.CommandContext(ctx, sdRun, append([]string{"--user", "--quiet", "--collect", "--unit", fmt.Sprintf("bench-sd-%d", i), "--"}, script(f)...)...))
		systemd = append(systemd, d)

		f = mark("legion")
		d = timeUntil(b, f, exec.CommandContext(ctx, e.bin, append([]string{"spawn", "--name", fmt.Sprintf("bench-%d", i), "--"}, script(f)...)...))
		legion = append(legion, d)
	}
	b.StopTimer()
	reportVs(b, legion, "ms/legion-spawn", systemd, "ms/systemd-run", "spawn/systemd-run")
}

// median sorts ds and returns its middle element.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// reportMS reports d in milliseconds as the metric unit.
func reportMS(b *testing.B, d time.Duration, unit string) {
	b.ReportMetric(float64(d.Microseconds())/1000, unit)
}

// reportVs reports the medians of got and of its baseline base, each in
// milliseconds, and the ratio of got's median to base's as ratioUnit.
func reportVs(b *testing.B, got []time.Duration, gotUnit string, base []time.Duration, baseUnit, ratioUnit string) {
	mg, mb := median(got), median(base)
	reportMS(b, mg, gotUnit)
	reportMS(b, mb, baseUnit)
	b.ReportMetric(float64(mg)/float64(mb), ratioUnit)
}

// timeUntil starts cmd and returns how long it took until file exists:
// until the command it launched runs, whether or not cmd has returned
// by then. cmd must succeed.
func timeUntil(b *testing.B, file string, cmd *exec.Cmd) time.Duration {
	b.Helper()
	cmd.Env = os.Environ()
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s: %v", cmd, err)
	}
	var took time.Duration
	for {
		if _, err := os.Stat(file); err == nil {
			took = time.Since(t0)
			break
		}
		if time.Since(t0) > waitFor {
			cmd.Process.Kill()
			b.Fatalf("%s: %s never appeared", cmd, file)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%s: %v\n%s", cmd, err, out.String())
	}
	return took
}

// recoveryTimes reads the "took" of every "recovery done" line with n
// recovered sessions from a helper log.
func recoveryTimes(logPath string, n int) []time.Duration {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	var out []time.Duration
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, `msg="recovery done"`) || !strings.Contains(l, fmt.Sprintf("recovered=%d ", n)) {
			continue
		}
		_, took, ok := strings.Cut(l, " took=")
		if !ok {
			continue
		}
		if d, err := time.ParseDuration(strings.Fields(took)[0]); err == nil {
			out = append(out, d)
		}
	}
	return out
}
