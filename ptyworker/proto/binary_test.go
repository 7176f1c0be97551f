package proto_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
)

func TestFindBinary(t *testing.T) {
	old := proto.LibexecDir
	t.Cleanup(func() { proto.LibexecDir = old })
	dir := t.TempDir()
	proto.LibexecDir = dir
	worker := filepath.Join(dir, proto.BinaryName)

	// Absent: the error names where it looked and how to install it.
	_, err := proto.FindBinary()
	if !errors.Is(err, proto.ErrNoBinary) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "make install") {
		t.Errorf("FindBinary with nothing installed: %v; want ErrNoBinary naming %s and make install", err, dir)
	}
	// Not executable: not taken.
	if err := os.WriteFile(worker, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := proto.FindBinary(); !errors.Is(err, proto.ErrNoBinary) {
		t.Errorf("FindBinary with a non-executable %s = %q, %v; want ErrNoBinary", worker, p, err)
	}
	if err := os.Chmod(worker, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := proto.FindBinary(); err != nil || p != worker {
		t.Errorf("FindBinary = %q, %v; want %q", p, err, worker)
	}
}
