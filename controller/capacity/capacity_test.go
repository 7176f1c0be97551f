package capacity

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller"
)

const meminfo = `MemTotal:       32768000 kB
MemFree:         1000000 kB
MemAvailable:    2097152 kB
Buffers:           10000 kB
`

func TestMemAvailable(t *testing.T) {
	tests := []struct {
		name, text string
		want       uint64
		err        string
	}{
		{"linux", meminfo, 2 << 30, ""},
		{"missing", "MemTotal: 1 kB\n", 0, "no MemAvailable line"},
		{"no unit", "MemAvailable: 12\n", 0, `MemAvailable is "12": expected a number of kB`},
		{"not a number", "MemAvailable: x kB\n", 0, "expected a number of kB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MemAvailable("/proc/meminfo", []byte(tt.text))
			if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("MemAvailable(%q) = %d, %v; want %d, error containing %q", tt.text, got, err, tt.want, tt.err)
			}
			if err != nil && !strings.Contains(err.Error(), "/proc/meminfo") {
				t.Errorf("MemAvailable error %q does not name the file", err)
			}
		})
	}
}

func FuzzMemAvailable(f *testing.F) {
	f.Add([]byte(meminfo))
	f.Add([]byte("MemAvailable: 18446744073709551615 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := MemAvailable("meminfo", data)
		if err == nil && n%1024 != 0 {
			t.Errorf("MemAvailable = %d: not whole kB", n)
		}
	})
}

// v1Tree makes root a cgroup v1 layout as a hybrid host has it (this
// process's memory cgroup /user.slice/user-0.slice/user@0.service/
// legion.slice/legion-0123abcd.slice/legion@demo.service): the slice with
// limit and usage, the controller and a worker with its peak. It returns
// the /proc/self/cgroup text.
func v1Tree(t testing.TB, root, limit string) []byte {
	t.Helper()
	slice := filepath.Join(root, "memory/user.slice/user-0.slice/user@0.service/legion.slice/legion-0123abcd.slice")
	files := map[string]string{
		"memory.limit_in_bytes": limit, "memory.usage_in_bytes": "1073741824\n",
		"legion@demo.service/memory.usage_in_bytes":                        "1000\n",
		"legion@demo.service/memory.max_usage_in_bytes":                    "2000\n",
		`legion-0123abcd-DEMO\x2d1-plan.service/memory.usage_in_bytes`:     "100\n",
		`legion-0123abcd-DEMO\x2d1-plan.service/memory.max_usage_in_bytes`: "943718400\n",
		`legion-0123abcd-DEMO\x2d2-plan.service/memory.usage_in_bytes`:     "5\n", // no peak file: current
	}
	for name, text := range files {
		p := filepath.Join(slice, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return []byte("9:name=systemd:/user.slice/user-0.slice/user@0.service/legion.slice/legion-0123abcd.slice/legion@demo.service\n" +
		"4:memory:/user.slice/user-0.slice/user@0.service/legion.slice/legion-0123abcd.slice/legion@demo.service\n0::/\n")
}

func TestFindSliceV1(t *testing.T) {
	root := t.TempDir()
	proc := v1Tree(t, root, "3221225472\n")
	s, err := FindSlice(root, proc, "0123abcd", 0)
	if err != nil || !strings.HasSuffix(s.Dir, "legion.slice/legion-0123abcd.slice") {
		t.Fatalf("FindSlice = %+v, %v; want the team's slice", s, err)
	}
	left, limit, limited, err := s.Room()
	if err != nil || !limited || limit != 3<<30 || left != 2<<30 {
		t.Errorf("Room() = %d, %d, %v, %v; want 2 GiB left of 3 GiB", left, limit, limited, err)
	}
	peaks, err := s.WorkerPeaks()
	want := map[string]uint64{`legion-0123abcd-DEMO\x2d1-plan.service`: 943718400, `legion-0123abcd-DEMO\x2d2-plan.service`: 5}
	if diff := cmp.Diff(want, peaks); err != nil || diff != "" {
		t.Errorf("WorkerPeaks() (-want +got), err %v:\n%s", err, diff)
	}

	// From a login shell, outside the manager: found below user@UID.service.
	s, err = FindSlice(root, []byte("4:memory:/user.slice/user-0.slice/session-1.scope\n"), "0123abcd", 0)
	if err != nil || s.Dir == "" {
		t.Errorf("FindSlice from a session scope = %+v, %v; want the slice", s, err)
	}
	// Another team's: none.
	if s, err := FindSlice(root, proc, "ffffffff", 0); err != nil || s.Dir != "" {
		t.Errorf("FindSlice(another team) = %+v, %v; want none", s, err)
	}
}

func TestSliceUnlimited(t *testing.T) {
	root := t.TempDir()
	proc := v1Tree(t, root, "9223372036854771712\n")
	s, err := FindSlice(root, proc, "0123abcd", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, limited, err := s.Room(); limited || err != nil {
		t.Errorf("Room() of an unlimited v1 slice: limited %v, %v; want unlimited", limited, err)
	}
}

func TestPeaksObserve(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var p Peaks
	if !p.Observe(map[string]uint64{"a": 100 << 20, "b": 10 << 20}, t0) {
		t.Error("Observe of new units: unchanged; want changed")
	}
	if p.Observe(map[string]uint64{"a": 100<<20 + 5, "b": 10 << 20}, t0) {
		t.Error("Observe of a peak grown by 5 bytes: changed; want not worth a write")
	}
	if _, ok := p.Expected(); ok {
		t.Error("Expected() before any finished: ok; want none")
	}
	if !p.Observe(map[string]uint64{"b": 300 << 20}, t0.Add(time.Minute)) {
		t.Error("Observe with a unit gone: unchanged; want changed")
	}
	if got, ok := p.Expected(); !ok || got != 100<<20+5 {
		t.Errorf("Expected() = %d, %v; want a's highest peak", got, ok)
	}
	p.Observe(nil, t0.Add(2*time.Minute))
	if got, _ := p.Expected(); got != 300<<20 {
		t.Errorf("Expected() = %d; want b's peak, the highest", got)
	}
	for i := range 2 * keepFinished {
		p.Observe(map[string]uint64{string(rune('c' + i)): 1}, t0)
	}
	p.Observe(nil, t0)
	if len(p.Finished) != keepFinished {
		t.Errorf("%d finished kept; want %d", len(p.Finished), keepFinished)
	}
	if got, _ := p.Expected(); got != 1 {
		t.Errorf("Expected() = %d after %d small agents; want the old peaks forgotten", got, keepFinished)
	}
}

func FuzzPeaksFile(f *testing.F) {
	f.Add([]byte(`{"live":{"u":1},"finished":[{"unit":"u","peak":5,"ended":"2026-11-29T12:00:00Z"}]}`))
	f.Add([]byte(`{"finished":[null,{"unit":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePeaks("capacity.json", data)
		if err != nil {
			return
		}
		if len(p.Finished) > keepFinished {
			t.Errorf("%d finished kept; want at most %d", len(p.Finished), keepFinished)
		}
		p.Observe(map[string]uint64{"x": 1}, time.Time{})
		path := filepath.Join(t.TempDir(), PeaksFile)
		if err := WritePeaks(path, p); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPeaks(path); err != nil {
			t.Errorf("ReadPeaks of what WritePeaks wrote: %v", err)
		}
	})
}

// TestSourceRoom: the controller's Source learns from the workers it sees
// end, keeps it across a restart (a new Source), and reads the room left
// under the slice's limit.
func TestSourceRoom(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	proc := v1Tree(t, root, "3221225472\n")
	procFile := filepath.Join(t.TempDir(), "cgroup")
	mem := filepath.Join(t.TempDir(), "meminfo")
	for p, data := range map[string][]byte{procFile: proc, mem: []byte(meminfo)} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{Short: "0123abcd", StateDir: state, AgentMemoryMax: 2 << 30, SessionLimit: 2, MachineLimit: 5,
		MachineLive: func(context.Context) (int, error) { return 3, nil },
		Meminfo:     mem, CgroupRoot: root, ProcCgroup: procFile, Learn: true}
	ctx := t.Context()
	r, err := New(opts).Room(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := controller.Room{SessionLimit: 2, MachineLimit: 5, MachineLive: 3, Memory: 2 << 30, MemoryKnown: true,
		SliceLimit: 3 << 30, SliceLeft: 2 << 30, AgentSize: 2 << 30, AgentSizeFrom: controller.SizeMemoryMax}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("Room() before any agent finished (-want +got):\n%s", diff)
	}
	// The planner of DEMO-1 ends; the slice is now limited to 1.5 GiB.
	slice := filepath.Join(root, "memory/user.slice/user-0.slice/user@0.service/legion.slice/legion-0123abcd.slice")
	if err := os.RemoveAll(filepath.Join(slice, `legion-0123abcd-DEMO\x2d1-plan.service`)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(slice, "memory.limit_in_bytes"), []byte("2684354560\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.Learn = false // what `legion state` reads, after a restart
	r, err = New(opts).Room(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.AgentSizeFrom != controller.SizeDefault && r.AgentSizeFrom != controller.SizeMemoryMax {
		t.Errorf("a reader learnt by itself: %+v", r)
	}
	opts.Learn = true
	if _, err = New(opts).Room(ctx); err != nil {
		t.Fatal(err)
	}
	opts.Learn = false
	r, err = New(opts).Room(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want.AgentSize, want.AgentSizeFrom = 943718400, controller.SizeLearnt
	want.SliceLimit, want.SliceLeft = 5<<29, 3<<29
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("Room() after the planner ended, read by another Source (-want +got):\n%s", diff)
	}
}

// BenchmarkRoom is the room's reading per tick in the controller: this
// machine's /proc/meminfo and cgroups (no team slice is found outside a
// user manager's units, so that part is the search) and capacity.json,
// with no machine limit (no helper call).
func BenchmarkRoom(b *testing.B) {
	s := New(Options{Short: "0123abcd", StateDir: b.TempDir(), Learn: true})
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Room(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzFindSlice: whatever /proc/self/cgroup says, FindSlice looks only
// below the cgroup root and finds the team's slice or none.
func FuzzFindSlice(f *testing.F) {
	root := f.TempDir()
	v1Tree(f, root, "3221225472\n")
	f.Add([]byte("4:memory:/user.slice/user-0.slice/user@0.service/legion.slice/legion-0123abcd.slice/legion@demo.service\n"))
	f.Add([]byte("4:memory:/../../..\n0::/\n"))
	f.Add([]byte("4:cpu,memory:\n"))
	f.Fuzz(func(t *testing.T, proc []byte) {
		s, err := FindSlice(root, proc, "0123abcd", 0)
		if err != nil {
			return
		}
		if s.Dir != "" && (!strings.HasPrefix(s.Dir, root+"/") || !strings.HasSuffix(s.Dir, "/legion.slice/legion-0123abcd.slice")) {
			t.Errorf("FindSlice(%q) = %s; want the slice below %s or none", proc, s.Dir, root)
		}
	})
}
