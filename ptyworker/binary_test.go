package ptyworker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBinary(t *testing.T) {
	old := LibexecDir
	t.Cleanup(func() { LibexecDir = old })
	dir := t.TempDir()
	LibexecDir = dir
	worker := filepath.Join(dir, BinaryName)

	// Absent: the error names where it looked and how to install it.
	_, err := FindBinary()
	if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "make install") {
		t.Errorf("FindBinary with nothing installed: %v; want ErrNoBinary naming %s and make install", err, dir)
	}
	// Not executable: not taken.
	if err := os.WriteFile(worker, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := FindBinary(); !errors.Is(err, ErrNoBinary) {
		t.Errorf("FindBinary with a non-executable %s = %q, %v; want ErrNoBinary", worker, p, err)
	}
	if err := os.Chmod(worker, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := FindBinary(); err != nil || p != worker {
		t.Errorf("FindBinary = %q, %v; want %q", p, err, worker)
	}
}
