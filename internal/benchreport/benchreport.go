// Package benchreport holds what Legion's benchmarks share: medians,
// metrics in milliseconds, a run reported as a ratio against its baseline
// from the same run, and the bare unix-socket round trip several of them
// take as that baseline. It is for _test.go files only.
package benchreport

import (
	"net"
	"os"
	"path/filepath"
	"slices"
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
