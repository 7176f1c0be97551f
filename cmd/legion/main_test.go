package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// legion runs the command tree in-process with args and returns what it
// printed.
func legion(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// sandboxXDG points the XDG directories and HOME into a temp dir.
func sandboxXDG(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, kv := range [][2]string{
		{"HOME", "home"}, {"XDG_CONFIG_HOME", "config"}, {"XDG_STATE_HOME", "state"},
		{"XDG_DATA_HOME", "data"}, {"XDG_CACHE_HOME", "cache"},
	} {
		p := filepath.Join(dir, kv[1])
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Setenv(kv[0], p)
	}
	return dir
}
