// Package benchreport holds what Legion's benchmarks share: medians,
// metrics in milliseconds, a run reported as a ratio against its baseline
// from the same run, the bare unix-socket round trip several of them
// take as that baseline, and the whole machine's CPU time. It is for
// _test.go files only.
package benchreport

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Median returns the middle element of ds (sorted in a copy).
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// MS reports d in milliseconds as the metric unit.
func MS(b *testing.B, d time.Duration, unit string) {
	b.ReportMetric(float64(d.Microseconds())/1000, unit)
}

// Vs reports the medians of got and of its baseline base, each in
// milliseconds, and the ratio of got's median to base's as ratioUnit.
func Vs(b *testing.B, got []time.Duration, gotUnit string, base []time.Duration, baseUnit, ratioUnit string) {
	mg, mb := Median(got), Median(base)
	MS(b, mg, gotUnit)
	MS(b, mb, baseUnit)
	b.ReportMetric(float64(mg)/float64(mb), ratioUnit)
}

// SocketRoundTrips times n bare unix-socket round trips: dial, one byte
// to a server that answers with one byte, the answer read.
func SocketRoundTrips(b *testing.B, n int) []time.Duration {
	b.Helper()
	dir, err := os.MkdirTemp("", "lgn-rt-") // short: sun_path holds 108 bytes
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "echo.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	// Ends when ln is closed.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var p [1]byte
				if _, err := c.Read(p[:]); err == nil {
					c.Write(p[:])
				}
			}()
		}
	}()
	out := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		var p [1]byte
		if _, err := c.Write([]byte{'x'}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(p[:]); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
		c.Close()
	}
	return out
}

// MachineTime is CPU time of the whole machine, all CPUs together: busy
// (user, nice, system, irq and softirq time) and idle (idle and iowait).
// Time the hypervisor gave to other guests (steal) is in neither.
type MachineTime struct{ Busy, Idle time.Duration }

// MachineNow is the machine's CPU time so far, from the first line of
// /proc/stat. Its unit is USER_HZ, 1/100 s on Linux: a run of a few
// hundred milliseconds is off by a tick or two at either end, which the
// sum over many runs evens out.
func MachineNow(b *testing.B) MachineTime {
	b.Helper()
	s, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(s), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		b.Fatalf("/proc/stat: first line %q: want cpu user nice system idle iowait irq softirq ...", line)
	}
	var v [7]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			b.Fatalf("/proc/stat: first line %q: %v", line, err)
		}
	}
	const tick = 10 * time.Millisecond // USER_HZ
	return MachineTime{
		Busy: time.Duration(v[0]+v[1]+v[2]+v[5]+v[6]) * tick,
		Idle: time.Duration(v[3]+v[4]) * tick,
	}
}

// Sub is m minus o.
func (m MachineTime) Sub(o MachineTime) MachineTime {
	return MachineTime{Busy: m.Busy - o.Busy, Idle: m.Idle - o.Idle}
}

// Add is m plus o.
func (m MachineTime) Add(o MachineTime) MachineTime {
	return MachineTime{Busy: m.Busy + o.Busy, Idle: m.Idle + o.Idle}
}

// IdlePercent is the share of the machine's CPU time that was idle.
func (m MachineTime) IdlePercent() float64 {
	if m.Busy+m.Idle <= 0 {
		return 0
	}
	return 100 * float64(m.Idle) / float64(m.Busy+m.Idle)
}

// LoadAvg is the machine's 1-minute load average, reported beside a
// benchmark's figures (the machine may be shared).
func LoadAvg(b *testing.B) float64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
