// Package chaostest is the seeded fault picker of Legion's chaos runs
// (controller/service's TestChaos, `make chaos`): every random choice of a
// run (which fault, when, on which target) comes from one PCG seeded from
// the run's seed, so a seed printed by a failed run replays the same
// choices. It also reads the list of recorded seeds a short run replays.
//
// It owns the choices and the tally of faults injected, never the faults
// themselves: the test that uses it kills, restarts and garbles. It is
// test code (internal/layout's testOnly) and never linked by a shipped
// binary.
package chaostest

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvSeed and EnvDuration set a run's seed (decimal or 0x hex) and length
// (a Go duration); unset, the seed is drawn at random and printed, and the
// length is the caller's default.
const (
	EnvSeed     = "CHAOS_SEED"
	EnvDuration = "CHAOS_DURATION"
)

// SeedFromEnv returns $CHAOS_SEED, or a fresh random seed when it is unset
// (set reports which).
func SeedFromEnv() (seed uint64, set bool, err error) {
	v := strings.TrimSpace(os.Getenv(EnvSeed))
	if v == "" {
		return rand.Uint64(), false, nil
	}
	seed, err = parseSeed(v)
	if err != nil {
		return 0, true, fmt.Errorf("%s=%q: %w", EnvSeed, v, err)
	}
	return seed, true, nil
}

// DurationFromEnv returns $CHAOS_DURATION, or def when it is unset.
func DurationFromEnv(def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(EnvDuration))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 30m", EnvDuration, v)
	}
	return d, nil
}

func parseSeed(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("want a seed as a decimal or 0x-hex unsigned 64-bit number, got %q", s)
	}
	return n, nil
}

// Seed is one entry of a regression list: the seed and why it is kept.
type Seed struct {
	Seed uint64
	Note string
}

// ParseSeeds reads a regression list: one seed per line (decimal or 0x
// hex), then optionally "#" and a note saying what it found; blank lines
// and lines starting with "#" are skipped. name is the file's name for
// errors.
func ParseSeeds(name string, r io.Reader) ([]Seed, error) {
	var out []Seed
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		field, note, _ := strings.Cut(line, "#")
		seed, err := parseSeed(strings.TrimSpace(field))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w (a line is SEED [# NOTE])", name, n, err)
		}
		out = append(out, Seed{Seed: seed, Note: strings.TrimSpace(note)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}

// Injector makes a run's random choices from its seed and tallies the
// faults injected. It is safe for concurrent use, but only calls made in
// the same order replay the same choices.
type Injector struct {
	seed uint64
	mu   sync.Mutex
	rng  *rand.Rand
	done map[string]int // faults injected, by kind
	miss map[string]int // faults picked but with no target at that moment
}

// New returns an Injector whose choices follow from seed.
func New(seed uint64) *Injector {
	return &Injector{
		seed: seed,
		rng:  rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		done: map[string]int{},
		miss: map[string]int{},
	}
}

// Seed returns the run's seed.
func (in *Injector) Seed() uint64 { return in.seed }

// Pick returns one of kinds, each with the given weight (> 0).
func (in *Injector) Pick(kinds []string, weights []int) string {
	if len(kinds) == 0 || len(kinds) != len(weights) {
		panic("chaostest: Pick wants as many weights as kinds, at least one")
	}
	total := 0
	for _, w := range weights {
		total += w
	}
	in.mu.Lock()
	n := in.rng.IntN(total)
	in.mu.Unlock()
	for i, w := range weights {
		if n < w {
			return kinds[i]
		}
		n -= w
	}
	return kinds[len(kinds)-1]
}

// IntN returns a number in [0, n).
func (in *Injector) IntN(n int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rng.IntN(n)
}

// Between returns a duration in [lo, hi).
func (in *Injector) Between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return lo + time.Duration(in.rng.Int64N(int64(hi-lo)))
}

// Done records a fault of kind injected; Missed one picked when it had
// no target (no worker running, say).
func (in *Injector) Done(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.done[kind]++
}

// Missed: see Done.
func (in *Injector) Missed(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.miss[kind]++
}

// Injected returns the number of faults injected, by kind.
func (in *Injector) Injected() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.done)
}

// Report is the tally as lines: "kind: n injected (m without a target)",
// by kind, and the seed.
func (in *Injector) Report() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	kinds := slices.Sorted(maps.Keys(in.done))
	for k := range in.miss {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	var b strings.Builder
	total := 0
	for _, k := range kinds {
		total += in.done[k]
		fmt.Fprintf(&b, "  %-20s %3d injected", k, in.done[k])
		if in.miss[k] > 0 {
			fmt.Fprintf(&b, " (%d picked with no target)", in.miss[k])
		}
		b.WriteByte('\n')
	}
	return fmt.Sprintf("seed %d (CHAOS_SEED=%d replays it): %d faults\n%s", in.seed, in.seed, total, b.String())
}
