package proto_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legion-dev/legion/ptyworker/proto"
)

func TestRegistryWriteRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registry")
	path := filepath.Join(dir, "s.json")
	lease, err := proto.NewLease(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := &proto.Registry{
		Version: proto.RegistryVersion, SessionID: "s", Name: "n", Team: "t", Token: "tok",
		WorkerPID: os.Getpid(), ChildPID: 42, SocketPath: "/run/x.sock", Owner: lease,
		State: proto.StateRunning, Run: 3, UpdatedAt: time.Now().UTC().Round(0),
		LastExit: &proto.ExitInfo{Code: 1, Reason: "exited", Time: time.Now().UTC().Round(0), Run: 2},
	}
	if err := proto.WriteRegistry(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := proto.ReadRegistry(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadRegistry(WriteRegistry(r)) mismatch (-want +got):\n%s", diff)
	}
	for p, mode := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeDir); got != mode {
			t.Errorf("mode of %s = %v; want %v", p, got, mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("registry dir holds %d entries; want only the file (no temp files left)", len(entries))
	}
}

// TestRegistryAtomic has writers replace the file while readers read it:
// a reader sees one complete version or another, never a mix or a part.
func TestRegistryAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	big := strings.Repeat("x", 64<<10) // big enough that a torn write would show
	if err := proto.WriteRegistry(path, &proto.Registry{Version: proto.RegistryVersion, SessionID: "s", Name: big, Run: 0}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 100)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := proto.WriteRegistry(path, &proto.Registry{Version: proto.RegistryVersion, SessionID: "s", Name: big, Run: i*2 + w}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	reads := 0
	for time.Now().Before(deadline) {
		r, err := proto.ReadRegistry(path)
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		if r.Name != big {
			t.Fatalf("read %d: torn registry file", reads)
		}
		reads++
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRegistryQuarantine(t *testing.T) {
	tests := []struct{ name, text string }{
		{"truncated JSON", `{"version":1,"session_id":"s","sta`},
		{"not JSON", "garbage\x00"},
		{"other version", `{"version":99,"session_id":"s"}`},
		{"no session id", `{"version":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.json")
			os.WriteFile(path, []byte(tc.text), 0o600)
			if _, err := proto.ReadRegistry(path); !errors.Is(err, proto.ErrCorruptRegistry) {
				t.Errorf("ReadRegistry() = %v; want ErrCorruptRegistry", err)
			}
			r, q, err := proto.LoadRegistry(path)
			if err != nil || r != nil || q == "" {
				t.Fatalf("LoadRegistry() = %v, %q, %v; want nil, a quarantine path, nil", r, q, err)
			}
			if !strings.HasPrefix(q, path+".corrupt-") {
				t.Errorf("quarantine path %s; want %s.corrupt-<time>", q, path)
			}
			if b, err := os.ReadFile(q); err != nil || string(b) != tc.text {
				t.Errorf("quarantined file = %q, %v; want the original bytes", b, err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("corrupt file still at %s", path)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		r, q, err := proto.LoadRegistry(filepath.Join(t.TempDir(), "none.json"))
		if r != nil || q != "" || err != nil {
			t.Errorf("LoadRegistry(missing) = %v, %q, %v; want nothing", r, q, err)
		}
	})
}

func TestLease(t *testing.T) {
	l, err := proto.NewLease(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !l.Alive() {
		t.Errorf("own lease %+v not alive", l)
	}
	stale := l
	stale.StartTime++
	if stale.Alive() {
		t.Errorf("lease with another start time alive; want dead (PID reuse)")
	}
	if (proto.Lease{PID: 0}).Alive() {
		t.Error("zero lease alive")
	}
	l2, _ := proto.NewLease(os.Getpid())
	if l2.Nonce == l.Nonce || len(l.Nonce) != 32 {
		t.Errorf("nonces %q, %q; want distinct 32 hex digits", l.Nonce, l2.Nonce)
	}
	boot, err := proto.BootID()
	if err != nil || len(boot) != 36 || l.BootID != boot {
		t.Errorf("BootID() = %q, %v; lease's %q; want the same UUID", boot, err, l.BootID)
	}
	// The same PID and start time in another boot is another process.
	other := l
	other.BootID = "00000000-0000-4000-8000-000000000000"
	if other.Alive() {
		t.Error("lease of another boot alive; want dead")
	}
	// Entries of workers from before the field: judged by PID and start time.
	old := l
	old.BootID = ""
	if !old.Alive() {
		t.Error("own lease without a boot ID not alive")
	}
}
