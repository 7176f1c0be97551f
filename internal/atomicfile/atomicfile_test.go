package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWritePrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "registry.json")

	if err := WritePrivate(path, []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	check := func(want string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s holds %q; want %q", path, b, want)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v; want 0600", path, fi.Mode().Perm())
		}
	}
	check("one\n")

	// An older file that others may read is replaced by a private one.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WritePrivate(path, []byte("two\n")); err != nil {
		t.Fatal(err)
	}
	check("two\n")

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries after two writes; want only %s (no temp files)", len(entries), filepath.Base(path))
	}

	if err := WritePrivate(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("writing into a directory that does not exist succeeded")
	}
}

func TestWriteMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "legion@.service")
	old := syscall.Umask(0o077) // a private umask must not narrow 0644
	defer syscall.Umask(old)
	for _, perm := range []os.FileMode{0o644, 0o640} {
		if err := Write(path, []byte("[Unit]\n"), perm); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != perm {
			t.Errorf("Write(..., %v) left mode %v", perm, fi.Mode().Perm())
		}
	}
}
