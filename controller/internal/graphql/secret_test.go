package graphql

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretLoad(t *testing.T) {
	const env = "LEGION_TEST_GRAPHQL_SECRET"
	s := Secret{Prefix: "test", Name: "API key", Short: "key", File: "key file"}
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# the key\n\n  k_FROMFILE  \nk_SECOND\n", 0o600)
	loose := write("loose", "k_LOOSE\n", 0o640)
	empty := write("empty", "", 0o600)
	comments := write("comments", "# nothing\n\n", 0o400)
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name, env, file, want, wantErr string
	}{
		{"env wins", " k_ENV\n", good, "k_ENV", ""},
		{"file", "", good, "k_FROMFILE", ""},
		{"blank env", "  ", good, "k_FROMFILE", ""},
		{"neither", "", missing, "", "test: no API key: set $" + env + " or write the key to " + missing + " (mode 0600)"},
		{"neither, no file", "", "", "", "test: no API key: set $" + env + " or configure a key file"},
		{"loose file", "", loose, "", "test: API key: key file " + loose + " has mode 0640: it must not be accessible by group or others (chmod 600 " + loose + ")"},
		{"empty file", "", empty, "", "key file " + empty + " is empty: want the API key on its first line"},
		{"only comments", "", comments, "", "key file " + comments + " has no key: want the API key on its first line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(env, tc.env)
			got, err := s.Load(env, tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load() = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "k_") {
					t.Errorf("Load() error %q contains the secret", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Load() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestSecretLoadWith: the variable is looked up by the getenv given, not
// in this process's environment.
func TestSecretLoadWith(t *testing.T) {
	const env = "LEGION_TEST_GRAPHQL_SECRET"
	t.Setenv(env, "k_PROCESS")
	s := Secret{Prefix: "test", Name: "token", Short: "token", File: "token file"}
	other := map[string]string{env: "k_OTHER"}
	if got, err := s.LoadWith(func(k string) string { return other[k] }, env, ""); err != nil || got != "k_OTHER" {
		t.Errorf("LoadWith(other) = %q, %v; want k_OTHER", got, err)
	}
	if got, err := s.LoadWith(func(string) string { return "" }, env, ""); err == nil {
		t.Errorf("LoadWith(empty) = %q; want an error", got)
	}
}

func TestSecretHint(t *testing.T) {
	s := Secret{Name: "token"}
	for _, tc := range []struct{ env, file, want string }{
		{"GITHUB_TOKEN", "", "the token in $GITHUB_TOKEN"},
		{"GITHUB_TOKEN", "/etc/legion/token", "the token in $GITHUB_TOKEN or /etc/legion/token"},
	} {
		if got := s.Hint(tc.env, tc.file); got != tc.want {
			t.Errorf("Hint(%q, %q) = %q; want %q", tc.env, tc.file, got, tc.want)
		}
	}
}

// TestSecretLoadFileOnly: a secret that lives only in a file (no variable
// to name) is read from it, and its absence names only the file.
func TestSecretLoadFileOnly(t *testing.T) {
	s := Secret{Prefix: "github", Name: "webhook secret", Short: "secret", File: "webhook secret file"}
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("s_FROMFILE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load("", good); err != nil || got != "s_FROMFILE" {
		t.Errorf("Load(\"\", %s) = %q, %v; want %q", good, got, err, "s_FROMFILE")
	}
	missing := filepath.Join(dir, "missing")
	want := "github: no webhook secret: write the secret to " + missing + " (mode 0600)"
	if _, err := s.Load("", missing); err == nil || err.Error() != want {
		t.Errorf("Load(\"\", %s) = %v; want %q", missing, err, want)
	}
}

// TestSecretRootGroupOnly: in a session's pod, a Secret volume's file is
// root's, mode 0440, read through the pod's fsGroup by a user who is not
// root: accepted. Root's own file, or one others can read, is not.
func TestSecretRootGroupOnly(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "linear")
	if err := os.WriteFile(p, []byte("k\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 0, 1000); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chown to root needs root (CI runs as root; this runs as uid %d): %v", os.Getuid(), err)
		}
		t.Skipf("chown to root needs root (this runs as uid %d): %v", os.Getuid(), err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !rootGroupOnly(fi, 1000) {
		t.Error("a root-owned 0440 file read by uid 1000: refused; want accepted (a Secret volume)")
	}
	if rootGroupOnly(fi, 0) {
		t.Error("a root-owned 0440 file read by root: accepted; want mode 0600 required")
	}
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	if fi, _ = os.Stat(p); rootGroupOnly(fi, 1000) {
		t.Error("a root-owned 0444 file: accepted; want refused (others can read it)")
	}
}
