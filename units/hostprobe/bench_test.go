package hostprobe_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/legion-dev/legion/units/hostprobe"
	"github.com/legion-dev/legion/units/sdtest"
)

// BenchmarkProbe: what the host probe adds to `legion install` and
// `legion doctor`, against its baseline in the same run: one transient
// unit that runs true(1) (systemd-run --user --wait), the least one probe
// unit costs. Reported: probe-ms, unit-ms and probe/unit.
func BenchmarkProbe(b *testing.B) {
	bin := sdtest.LegionBinary(b)
	sdtest.Start(b)
	var probe, unit time.Duration
	for b.Loop() {
		start := time.Now()
		if out, err := exec.Command("systemd-run", "--user", "--wait", "--quiet", "--collect", "/bin/true").CombinedOutput(); err != nil {
			b.Fatalf("systemd-run: %v\n%s", err, out)
		}
		unit += time.Since(start)
		start = time.Now()
		if rep := hostprobe.Probe(b.Context(), hostprobe.Options{Bin: bin}); rep.Err != nil {
			b.Fatal(rep.Err)
		}
		probe += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(probe.Milliseconds())/n, "probe-ms")
	b.ReportMetric(float64(unit.Milliseconds())/n, "unit-ms")
	b.ReportMetric(float64(probe)/float64(unit), "probe/unit")
}
