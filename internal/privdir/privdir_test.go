package privdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestEnsure(t *testing.T) {
	root := t.TempDir()

	t.Run("creates missing directories 0700", func(t *testing.T) {
		dir := filepath.Join(root, "a", "b")
		if err := Ensure(dir); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, dir); !m.IsDir() || m.Perm() != 0o700 {
			t.Errorf("%s has mode %v; want a directory, 0700", dir, m)
		}
		if err := Ensure(dir); err != nil {
			t.Errorf("second Ensure of %s: %v", dir, err)
		}
	})

	t.Run("tightens a wider mode", func(t *testing.T) {
		dir := filepath.Join(root, "wide")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil { // past the umask
			t.Fatal(err)
		}
		if err := Ensure(dir); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, dir); m.Perm() != 0o700 {
			t.Errorf("%s has mode %v after Ensure; want 0700", dir, m.Perm())
		}
	})

	t.Run("refuses a symlink and leaves its target alone", func(t *testing.T) {
		target := filepath.Join(root, "target")
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(target, 0o755); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(root, "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		err := Ensure(link)
		if err == nil || !strings.Contains(err.Error(), "symlink") || !strings.Contains(err.Error(), link) {
			t.Errorf("Ensure(%s) = %v; want an error naming the link as a symlink", link, err)
		}
		if m := mode(t, target); m.Perm() != 0o755 {
			t.Errorf("the link's target was changed to %v", m.Perm())
		}
	})

	t.Run("refuses a file", func(t *testing.T) {
		file := filepath.Join(root, "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Ensure(file); err == nil {
			t.Errorf("Ensure(%s) on a regular file succeeded", file)
		}
	})

	t.Run("refuses another user's directory", func(t *testing.T) {
		if os.Getuid() != 0 {
			const why = "needs root to give a directory to another user (CI runs as root)"
			if os.Getenv("CI") == "true" {
				t.Fatal(why)
			}
			t.Skip(why)
		}
		dir := filepath.Join(root, "theirs")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		err := Ensure(dir)
		if err == nil || !strings.Contains(err.Error(), "uid 65534") {
			t.Errorf("Ensure(%s) = %v; want a refusal naming uid 65534", dir, err)
		}
		if m := mode(t, dir); m.Perm() != 0o755 {
			t.Errorf("another user's directory was changed to %v", m.Perm())
		}
	})
}
