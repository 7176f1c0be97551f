package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWebPrintsLoginURL: `legion web` prints the login URL of legion.toml's
// [web] address and port with the token made on first use (0600 in the
// state dir), the same token each time, and warns when the address is not
// a loopback one.
func TestWebPrintsLoginURL(t *testing.T) {
	dir := sandboxXDG(t)
	cfg := filepath.Join(dir, "config", "legion", "legion.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[web]\nport = 8123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := regexp.MustCompile(`^http://127\.0\.0\.1:8123/login#t=[A-Za-z0-9_-]{43}\n$`)
	out, errOut, err := legion(t, "web")
	if err != nil || !url.MatchString(out) || errOut != "" {
		t.Fatalf("legion web = %q, %q, %v; want the login URL on port 8123", out, errOut, err)
	}
	tok := filepath.Join(dir, "state", "legion", "web-token")
	if fi, err := os.Stat(tok); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %s: %v, %v; want mode 0600", tok, fi, err)
	}
	again, _, err := legion(t, "web", "--json")
	if err != nil || !strings.Contains(again, strings.TrimSpace(out)) {
		t.Errorf("legion web --json = %q, %v; want the same URL %q", again, err, out)
	}

	if err := os.WriteFile(cfg, []byte("[web]\naddress = \"0.0.0.0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = legion(t, "web")
	if err != nil || !strings.HasPrefix(out, "http://127.0.0.1:7787/login#t=") || !strings.Contains(errOut, "other machines can reach") {
		t.Errorf("legion web with address 0.0.0.0 = %q, %q, %v; want the loopback URL and a warning", out, errOut, err)
	}
}
