package doctor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/capacity"
	"github.com/legion-dev/legion/controller/team"
)

// TestCapacity: an agent the machine could never hold fails, as one the
// team's slice could not; one that does not fit in what is available now
// warns (it waits for room); the size is the learnt peak when the
// controller learnt one, else agent.memory_max, else the default.
func TestCapacity(t *testing.T) {
	dir := t.TempDir()
	meminfo := filepath.Join(dir, "meminfo")
	if err := os.WriteFile(meminfo, []byte("MemTotal:        4194304 kB\nMemFree:  1 kB\nMemAvailable:    2097152 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm := config.Team{Name: "demo"}
	expect(t, checkCapacity(tm, dir, meminfo), OK, "1.0 GiB (the default", "")
	tm.Agent.MemoryMax = 3 << 30
	expect(t, checkCapacity(tm, dir, meminfo), Warn, "2.0 GiB of 4.0 GiB is available now: new agents wait for room", "legion state")
	tm.Agent.MemoryMax = 8 << 30
	expect(t, checkCapacity(tm, dir, meminfo), Fail, "more than the machine's memory, 4.0 GiB", "lower agent.memory_max")
	tm.Agent.MemoryMax, tm.MemoryMax = 0, 512<<20
	expect(t, checkCapacity(tm, dir, meminfo), Fail, "more than the team's slice holds (memory_max 512 MiB)", "raise memory_max")

	// A learnt peak wins over the default.
	tm.MemoryMax = 0
	state := team.StateDir(tm, dir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	p := capacity.Peaks{Finished: []capacity.Finished{{Unit: "legion-x.service", Peak: 300 << 20, Ended: time.Now()}}}
	if err := capacity.WritePeaks(filepath.Join(state, capacity.PeaksFile), p); err != nil {
		t.Fatal(err)
	}
	expect(t, checkCapacity(tm, dir, meminfo), OK, "300 MiB (the highest peak of its last agents)", "")
	expect(t, checkCapacity(tm, dir, filepath.Join(dir, "none")), Warn, "cannot be read", "readable")
}
