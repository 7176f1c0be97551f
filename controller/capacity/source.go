package capacity

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// DefaultAgentSize is a team's expected agent size before any of its
// agents finished, when it sets no agent.memory_max: about what one
// coding agent (a Node.js CLI and the tools it runs: a build, a test run)
// takes.
const DefaultAgentSize = 1 << 30

// Options configure a Source.
type Options struct {
	Short    string // the team's short ID: its slice is legion-<Short>.slice
	StateDir string // the team's state directory, where PeaksFile is
	// AgentMemoryMax is agent.memory_max (0: unset), the expected size
	// before any agent finished.
	AgentMemoryMax uint64
	// SessionLimit and MachineLimit are the team's and [helper]'s
	// session_limit (0: none).
	SessionLimit, MachineLimit int
	// Learn samples the team's running workers' peak memory on every
	// Room and writes what it learns: for the team's controller only.
	Learn bool
	// MachineLive counts the live sessions of all teams; nil asks the
	// helper (CountLive). Called only with a MachineLimit.
	MachineLive func(ctx context.Context) (int, error)
	// Log, when not nil, hears of what cannot be read (the room is then
	// taken as unknown, which gates nothing) and of a corrupt peaks file.
	Log *slog.Logger

	// Test seams: the files read; empty means the system's.
	Meminfo    string // MeminfoPath
	CgroupRoot string // CgroupRoot
	ProcCgroup string // /proc/self/cgroup
	Now        func() time.Time
}

// Source reads a team's room for agents; it is a controller.RoomSource.
type Source struct {
	o     Options
	mu    sync.Mutex
	peaks *Peaks // what Learn knows, read once
}

// New returns the Source of o.
func New(o Options) *Source {
	if o.Meminfo == "" {
		o.Meminfo = MeminfoPath
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = CgroupRoot
	}
	if o.ProcCgroup == "" {
		o.ProcCgroup = "/proc/self/cgroup"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MachineLive == nil {
		o.MachineLive = CountLive
	}
	return &Source{o: o}
}

// Room reads the room there is now. Memory that cannot be read is
// reported unknown (MemoryKnown false, SliceLimit 0) and logged, not an
// error: memory then holds nothing back, as without this Source. The
// session count of a machine limit is an error when the helper cannot be
// asked.
func (s *Source) Room(ctx context.Context) (controller.Room, error) {
	r := controller.Room{SessionLimit: s.o.SessionLimit, MachineLimit: s.o.MachineLimit}
	if r.MachineLimit > 0 {
		n, err := s.o.MachineLive(ctx)
		if err != nil {
			return controller.Room{}, fmt.Errorf("count the live sessions of all teams: %w", err)
		}
		r.MachineLive = n
	}
	slice, err := s.slice()
	if err != nil {
		s.warn("capacity: the team's slice cannot be read; its memory_max is not checked", err)
	}
	peaks := s.learn(slice)
	r.AgentSize, r.AgentSizeFrom = DefaultAgentSize, controller.SizeDefault
	switch learnt, ok := peaks.Expected(); {
	case ok && learnt > 0:
		r.AgentSize, r.AgentSizeFrom = learnt, controller.SizeLearnt
		if m := s.o.AgentMemoryMax; m > 0 && learnt > m {
			r.AgentSize = m // agent.memory_max was lowered since
		}
	case s.o.AgentMemoryMax > 0:
		r.AgentSize, r.AgentSizeFrom = s.o.AgentMemoryMax, controller.SizeMemoryMax
	}
	if avail, err := readMemAvailable(s.o.Meminfo); err != nil {
		s.warn("capacity: the available memory cannot be read; the machine's memory holds no dispatch back", err)
	} else {
		r.Memory, r.MemoryKnown = avail, true
	}
	if slice.Dir != "" {
		left, limit, limited, err := slice.Room()
		switch {
		case err != nil:
			s.warn("capacity: the team's slice cannot be read; its memory_max is not checked", err)
		case limited:
			r.SliceLeft, r.SliceLimit = left, limit
		}
	}
	return r, nil
}

func (s *Source) slice() (Slice, error) {
	proc, err := os.ReadFile(s.o.ProcCgroup)
	if err != nil {
		return Slice{}, fmt.Errorf("read this process's cgroup: %w", err)
	}
	return FindSlice(s.o.CgroupRoot, proc, s.o.Short, os.Getuid())
}

// learn returns the team's peaks: with Learn, sampled from slice into
// what the controller learnt so far, written when changed; else as the
// controller last wrote them.
func (s *Source) learn(slice Slice) Peaks {
	path := filepath.Join(s.o.StateDir, PeaksFile)
	if !s.o.Learn {
		p, err := ReadPeaks(path)
		if err != nil {
			s.warn("capacity: the learnt agent sizes cannot be read", err)
		}
		return p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peaks == nil {
		p, err := ReadPeaks(path)
		if err != nil {
			moved, qerr := atomicfile.Quarantine(path, s.o.Now())
			if s.o.Log != nil {
				s.o.Log.Warn("capacity: the learnt agent sizes were unreadable: learning again", "err", err, "moved_to", moved, "move_err", qerr)
			}
			p = Peaks{}
		}
		s.peaks = &p
	}
	if slice.Dir == "" {
		return *s.peaks
	}
	running, err := slice.WorkerPeaks()
	if err != nil {
		s.warn("capacity: the workers' peak memory cannot be read", err)
		return *s.peaks
	}
	if s.peaks.Observe(running, s.o.Now()) {
		if err := WritePeaks(path, *s.peaks); err != nil {
			s.warn("capacity: what was learnt of the agents' memory is not saved", err)
		}
	}
	return *s.peaks
}

func (s *Source) warn(msg string, err error) {
	if s.o.Log != nil {
		s.o.Log.Warn(msg, "err", err)
	}
}

// CountLive counts the sessions the helper lists that are not over, of
// every team and ad-hoc ones: what a machine's session_limit caps.
func CountLive(ctx context.Context) (int, error) {
	c, err := api.Dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	res, err := c.List(ctx)
	if err != nil {
		return 0, err
	}
	return Live(res.Sessions), nil
}

// Live counts the sessions among ss that are not over.
func Live(ss []api.Session) int {
	n := 0
	for _, s := range ss {
		if !s.State.Ended() {
			n++
		}
	}
	return n
}
