package activation

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
)

func TestLoadDaemonID(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name    string
		content *string // nil: no file
		keep    bool    // the content's id is kept
		aside   bool    // a .corrupt-* file is left
	}{
		{name: "missing"},
		{name: "valid", content: ptr("0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c\n"), keep: true},
		{name: "valid without newline", content: ptr("0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c"), keep: true},
		{name: "garbage", content: ptr("not an id\n"), aside: true},
		{name: "empty", content: ptr(""), aside: true},
		{name: "braced uuid", content: ptr("{0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c}"), aside: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "legion")
			path := filepath.Join(dir, DaemonIDFile)
			if tt.content != nil {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(*tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			id, err := loadDaemonID(path, log)
			if err != nil {
				t.Fatalf("loadDaemonID = %v", err)
			}
			if _, err := uuid.Parse(id); err != nil {
				t.Errorf("loadDaemonID = %q; want a UUID", id)
			}
			if tt.keep && id != strings.TrimSpace(*tt.content) {
				t.Errorf("loadDaemonID = %q; want the stored %q", id, *tt.content)
			}
			again, err := loadDaemonID(path, log)
			if err != nil || again != id {
				t.Errorf("second loadDaemonID = %q, %v; want %q (persistent)", again, err, id)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("daemon id file mode = %v, %v; want 0600", fi.Mode(), err)
			}
			matches, _ := filepath.Glob(path + ".corrupt-*")
			if (len(matches) == 1) != tt.aside {
				t.Errorf("corrupt copies = %v; want one: %v", matches, tt.aside)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestListenRefusesLiveSocket(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "run", api.SocketName)
	l, err := listen(path)
	if err != nil {
		t.Fatalf("listen(%s) = %v", path, err)
	}
	defer l.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, %v; want 0600", fi.Mode(), err)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode = %v, %v; want 0700", di.Mode(), err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := listen(path); !errors.Is(err, errHelperRunning) {
		t.Errorf("second listen(%s) = %v; want errHelperRunning", path, err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, api.SocketName)
	// A socket file nobody listens on: what a crashed helper leaves.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	l2, err := listen(path)
	if err != nil {
		t.Fatalf("listen over a stale socket = %v; want it replaced", err)
	}
	l2.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v; want it removed", err)
	}
}

func TestListenLeavesOtherFiles(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, api.SocketName)
	if err := os.WriteFile(path, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listen(path); err == nil || !strings.Contains(err.Error(), "in the way") {
		t.Errorf("listen over a regular file = %v; want an error naming it in the way", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "mine" {
		t.Errorf("file content = %q; want it untouched", b)
	}
}

// shortTempDir is a temp dir with a short path (sun_path holds 108 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lgn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
