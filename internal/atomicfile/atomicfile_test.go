package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
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

func TestQuarantine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	now := time.Date(2026, 2, 11, 10, 0, 0, 1, time.UTC)
	var asides []string
	for i, content := range []string{"first", "second"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		aside, err := Quarantine(path, now.Add(time.Duration(i)))
		if err != nil {
			t.Fatal(err)
		}
		if want := path + ".corrupt-20260211T100000.00000000" + strconv.Itoa(1+i) + "Z"; aside != want {
			t.Errorf("Quarantine moved %s to %s; want %s", path, aside, want)
		}
		if b, err := os.ReadFile(aside); err != nil || string(b) != content {
			t.Errorf("%s holds %q, %v; want %q", aside, b, err, content)
		}
		asides = append(asides, aside)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there after Quarantine: %v", path, err)
	}
	if asides[0] == asides[1] {
		t.Errorf("two quarantines a nanosecond apart share the name %s", asides[0])
	}
	if _, err := Quarantine(path, now); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Quarantine of a missing file = %v; want ErrNotExist", err)
	}
}
