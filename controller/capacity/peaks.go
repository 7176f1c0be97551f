package capacity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/legion-dev/legion/internal/atomicfile"
)

// PeaksFile is the name, in the team's state directory, of what the
// controller learnt of its agents' memory.
const PeaksFile = "capacity.json"

// keepFinished is how many finished agents' peaks are kept: the expected
// size is the highest of them, so an agent that once needed much counts
// until this many others finished after it.
const keepFinished = 10

// Peaks is what the team's controller learnt of its agents' memory: the
// highest peak seen so far of each worker unit running, and the peaks of
// the last finished ones, newest last.
type Peaks struct {
	Live     map[string]uint64 `json:"live"`
	Finished []Finished        `json:"finished"`
}

// Finished is the peak memory of one finished run of a worker unit.
type Finished struct {
	Unit  string    `json:"unit"`
	Peak  uint64    `json:"peak"`
	Ended time.Time `json:"ended"` // when it was seen gone
}

// Expected is the highest peak of the finished agents, and false when
// none has finished.
func (p Peaks) Expected() (uint64, bool) {
	var m uint64
	for _, f := range p.Finished {
		m = max(m, f.Peak)
	}
	return m, len(p.Finished) > 0
}

// Observe folds one sampling of the running workers' peaks into p: a unit
// no longer running has finished with the highest peak seen of it. It
// reports whether p changed enough to be written: a unit started or
// finished, or a peak grew by a MiB or more.
func (p *Peaks) Observe(running map[string]uint64, now time.Time) bool {
	if p.Live == nil {
		p.Live = map[string]uint64{}
	}
	changed := false
	for _, unit := range slices.Sorted(maps.Keys(p.Live)) {
		if _, ok := running[unit]; !ok {
			p.Finished = append(p.Finished, Finished{Unit: unit, Peak: p.Live[unit], Ended: now})
			delete(p.Live, unit)
			changed = true
		}
	}
	if n := len(p.Finished); n > keepFinished {
		p.Finished = slices.Clone(p.Finished[n-keepFinished:])
	}
	for unit, peak := range running {
		old, ok := p.Live[unit]
		if !ok || peak >= old+1<<20 {
			changed = true
		}
		p.Live[unit] = max(old, peak)
	}
	return changed
}

// ReadPeaks reads the peaks file at path; a missing file is no peaks.
func ReadPeaks(path string) (Peaks, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Peaks{}, nil
	}
	if err != nil {
		return Peaks{}, fmt.Errorf("read the learnt agent sizes: %w", err)
	}
	return parsePeaks(path, data)
}

func parsePeaks(path string, data []byte) (Peaks, error) {
	var p Peaks
	if err := json.Unmarshal(data, &p); err != nil {
		return Peaks{}, fmt.Errorf("read %s: %w: expected the JSON object the team's controller writes (remove the file to learn again)", path, err)
	}
	p.Finished = slices.DeleteFunc(p.Finished, func(f Finished) bool { return f.Unit == "" })
	if n := len(p.Finished); n > keepFinished {
		p.Finished = p.Finished[n-keepFinished:]
	}
	return p, nil
}

// WritePeaks replaces the peaks file at path with p.
func WritePeaks(path string, p Peaks) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("write the learnt agent sizes: %w", err)
	}
	if err := atomicfile.WritePrivate(path, append(data, '\n')); err != nil {
		return fmt.Errorf("write the learnt agent sizes: %w", err)
	}
	return nil
}
