package layout_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCitedPathsExist: every path of the repository that a source file,
// doc or script cites (a word that starts with one of the repository's
// top-level directories, e.g. agent/gemini/FACTS.md or
// controller/instructions) names a file or directory the repository has,
// so that no comment sends a reader to a file that moved or never was.
// A Go identifier after a package path (agent/kinds.For) is allowed; a
// pattern (scripts/install-*, agent/<kind>) is not checked. Nor may any
// cite the design notes outside the repository (notes/…, seeds/…,
// DESIGN.md, STYLE.md), which a reader of the repository does not have.
func TestCitedPathsExist(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	tracked := strings.Fields(string(out))
	var tops []string
	for _, f := range tracked {
		if top, _, ok := strings.Cut(f, "/"); ok && !strings.HasPrefix(top, ".") && !slices.Contains(tops, top) {
			tops = append(tops, top)
		}
	}
	cite := regexp.MustCompile(`(^|[^\w/.~$-])((?:` + strings.Join(tops, "|") + `)/[\w./-]*\w)([^\w/*<{-]|$)`)
	// The design notes the project was specified with live beside the
	// repository, not in it.
	outside := regexp.MustCompile(`\b(?:notes|seeds)/[\w.-]+|\b(?:DESIGN|STYLE)\.md\b`)
	exists := func(p string) bool {
		for {
			if _, err := os.Stat(filepath.Join(root, p)); err == nil {
				return true
			}
			dir, last := filepath.Split(p)
			i := strings.LastIndexByte(last, '.')
			if i <= 0 {
				return false
			}
			p = dir + last[:i] // agent/kinds.For → agent/kinds
		}
	}
	for _, f := range tracked {
		switch {
		case strings.HasSuffix(f, ".go"), strings.HasSuffix(f, ".md"), strings.HasSuffix(f, ".toml"),
			f == "Makefile", strings.HasPrefix(f, "scripts/"), strings.HasPrefix(f, ".ci/"):
		default:
			continue
		}
		if f == "internal/layout/cites_test.go" { // its own examples
			continue
		}
		file, err := os.Open(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if m := outside.FindString(sc.Text()); m != "" {
				t.Errorf("%s:%d cites %s, which is outside the repository (the project's design notes are not shipped): say what it says instead", f, n, m)
			}
			for _, m := range cite.FindAllStringSubmatch(sc.Text(), -1) {
				if p := m[2]; !strings.HasPrefix(p, "bin/") && !exists(p) {
					t.Errorf("%s:%d cites %s, which the repository does not have", f, n, p)
				}
			}
		}
		file.Close()
	}
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	return strings.TrimSpace(string(out))
}
