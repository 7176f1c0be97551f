package contrib

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInstallSkills(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "legion-worker", "mine.md")
	if err := os.MkdirAll(filepath.Dir(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, []byte("my notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if w, err := InstallSkills(dir, true); err != nil || len(w) == 0 {
		t.Fatalf("dry run = %v, %v; want files listed", w, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "legion-controller")); !os.IsNotExist(err) {
		t.Fatalf("dry run wrote files")
	}
	written, err := InstallSkills(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"legion-controller/SKILL.md", "legion-worker/SKILL.md", "legion-worker/workflows/finish.md", "legion-worker/workflows/review.md"} {
		data, err := os.ReadFile(filepath.Join(dir, want))
		if err != nil || len(data) == 0 {
			t.Errorf("%s: %v (%d bytes)", want, err, len(data))
		}
	}
	if again, err := InstallSkills(dir, false); err != nil || len(again) != 0 {
		t.Errorf("second install wrote %v, %v; want nothing", again, err)
	}
	if kept, _ := os.ReadFile(foreign); string(kept) != "my notes" {
		t.Errorf("a file Legion does not ship was changed: %q", kept)
	}
	if len(written) < 7 {
		t.Errorf("wrote %d files; want every skill file", len(written))
	}
}
