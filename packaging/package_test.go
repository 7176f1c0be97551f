// Package packaging holds the tests of Legion's distribution packages
// (nfpm.yaml, build.sh, verify-units.sh) and, in packaging/docs, the
// generators of the man pages and completions. It has no code of its own:
// it builds the packages the way `make package` does and inspects them.
package packaging

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units/sdtest"
)

// Inputs of the test build: fixed, so names and contents are known.
const (
	testVersion = "v1.2.3-4-gabc1234"
	testCommit  = "abc1234"
	pkgVersion  = "1.2.3+4.gabc1234" // what build.sh makes of testVersion
	testEpoch   = "1795000000"       // 2026-11-18
)

// moduleRoot is the repository, one up from this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// buildPackages runs `make package` into a fresh directory and returns it.
func buildPackages(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"make", "go", "git", "gzip"} {
		_, err := exec.LookPath(tool)
		sdtest.Require(t, tool+" in PATH", err == nil)
	}
	dist := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "make", "-s", "package",
		"DIST="+dist, "VERSION="+testVersion, "COMMIT="+testCommit)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+testEpoch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make package: %v\n%s", err, out)
	}
	return dist
}

// TestPackageVersion checks how build.sh turns git describe output into a
// package version.
func TestPackageVersion(t *testing.T) {
	tests := []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"v2", "2"},
		{"1.0", "1.0"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+4.gabc1234.dirty"},
		{"abc1234", "0.0.0+abc1234"},
		{"1234abc-dirty", "0.0.0+1234abc.dirty"},
		{"dev", "0.0.0+dev"},
	}
	script := filepath.Join(moduleRoot(t), "packaging", "build.sh")
	for _, tt := range tests {
		out, err := exec.CommandContext(t.Context(), script, "version", tt.describe).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != tt.want {
			t.Errorf("build.sh version %s = %q, %v; want %q", tt.describe, got, err, tt.want)
		}
	}
	for _, bad := range []string{"v1 2", "v1.2;rm"} {
		if err := exec.CommandContext(t.Context(), script, "version", bad).Run(); err == nil {
			t.Errorf("build.sh version %q succeeded; want an error", bad)
		}
	}
}

// TestPackages builds the three packages, unpacks the .deb into a scratch
// root and checks what is there: every file with its mode, the units'
// ExecStart=, the control fields, the binary's version, and that the units
// pass `systemd-analyze --user verify` with nothing on stderr as installed.
func TestPackages(t *testing.T) {
	_, err := exec.LookPath("dpkg-deb")
	sdtest.Require(t, "dpkg-deb in PATH (Debian package dpkg)", err == nil)
	dist := buildPackages(t)

	deb := onlyFile(t, dist, "legion_"+pkgVersion+"-1_*.deb")
	rpm := onlyFile(t, dist, "legion-"+pkgVersion+"-1.*.rpm")
	arch := onlyFile(t, dist, "legion-"+pkgVersion+"-1-*.pkg.tar.zst")

	root := t.TempDir()
	if out, err := exec.CommandContext(t.Context(), "dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
	}

	t.Run("files", func(t *testing.T) { checkFiles(t, root) })
	t.Run("control", func(t *testing.T) { checkControl(t, deb) })
	t.Run("units", func(t *testing.T) { checkUnits(t, root) })
	t.Run("binary", func(t *testing.T) {
		out, err := exec.CommandContext(t.Context(), filepath.Join(root, "usr/bin/legion"), "version").Output()
		if want := "legion " + testVersion + " (commit " + testCommit + ")\n"; err != nil || string(out) != want {
			t.Errorf("usr/bin/legion version = %q, %v; want %q", out, err, want)
		}
		out, err = exec.CommandContext(t.Context(), filepath.Join(root, "usr/libexec/legion/legion-pty-worker"), "--version").Output()
		if want := "legion-pty-worker " + testVersion + "\n"; err != nil || string(out) != want {
			t.Errorf("usr/libexec/legion/legion-pty-worker --version = %q, %v; want %q", out, err, want)
		}
		out, err = exec.CommandContext(t.Context(), filepath.Join(root, "usr/libexec/legion/legion-kube"), "--version").Output()
		if want := "legion-kube " + testVersion + "\n"; err != nil || string(out) != want {
			t.Errorf("usr/libexec/legion/legion-kube --version = %q, %v; want %q", out, err, want)
		}
		// The demo links test code: a packaged legion is built without
		// it (internal/layout checks what it links), says so, and has no
		// page for it.
		out, err = exec.CommandContext(t.Context(), filepath.Join(root, "usr/bin/legion"), "demo").CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "make demo") {
			t.Errorf("usr/bin/legion demo: %v\n%s\nwant exit status 1 and a message naming make demo", err, out)
		}
		if _, err := os.Stat(filepath.Join(root, "usr/share/man/man1/legion-demo.1.gz")); err == nil {
			t.Errorf("the package has a man page for legion demo, which its legion has not")
		}
	})
	t.Run("man pages render", func(t *testing.T) { checkManPages(t, root) })
	t.Run("systemd-analyze verify", func(t *testing.T) { verifyUnits(t, root) })
	t.Run("rpm", func(t *testing.T) {
		data := readFile(t, rpm)
		if !bytes.HasPrefix(data, []byte{0xed, 0xab, 0xee, 0xdb}) {
			t.Errorf("%s does not start with the rpm lead magic", rpm)
		}
	})
	t.Run("archlinux", func(t *testing.T) { checkArch(t, arch) })
}

// onlyFile returns the one file in dir matching pattern.
func onlyFile(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) != 1 {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("want one %s in the build output, got %v (dir holds %v)", pattern, m, names)
	}
	if fi, err := os.Stat(m[0]); err != nil || fi.Size() == 0 {
		t.Fatalf("%s is empty or unreadable (%v)", m[0], err)
	}
	return m[0]
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkFiles compares every regular file of the scratch root, with its
// mode, against the expected list. Man pages are checked by pattern: one
// per visible command, gzipped.
func checkFiles(t *testing.T, root string) {
	want := map[string]fs.FileMode{
		"usr/bin/legion":                                       0o755,
		"usr/libexec/legion/legion-pty-worker":                 0o755,
		"usr/libexec/legion/legion-kube":                       0o755,
		"usr/lib/systemd/user/legion.socket":                   0o644,
		"usr/lib/systemd/user/legion.service":                  0o644,
		"usr/lib/systemd/user/legion@.service":                 0o644,
		"usr/share/doc/legion/README.md":                       0o644,
		"usr/share/doc/legion/legion.toml":                     0o644,
		"usr/share/bash-completion/completions/legion":         0o644,
		"usr/share/zsh/vendor-completions/_legion":             0o644,
		"usr/share/fish/vendor_completions.d/legion.fish":      0o644,
		"usr/share/man/man5/legion.toml.5.gz":                  0o644,
		"usr/share/man/man1/legion.1.gz":                       0o644,
		"usr/share/man/man1/legion-install.1.gz":               0o644,
		"usr/share/man/man1/legion-doctor.1.gz":                0o644,
		"usr/share/man/man1/legion-version.1.gz":               0o644,
		"usr/share/man/man1/legion-team-add.1.gz":              0o644,
		"usr/share/man/man1/legion-completion-bash.1.gz":       0o644,
		"usr/share/man/man1/legion-completion-zsh.1.gz":        0o644,
		"usr/share/man/man1/legion-completion-fish.1.gz":       0o644,
		"usr/share/man/man1/legion-completion.1.gz":            0o644,
		"usr/share/man/man1/legion-completion-powershell.1.gz": 0o644,
	}
	manPage := regexp.MustCompile(`^usr/share/man/man1/legion(-[a-z]+)*\.1\.gz$`)
	got := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if info.Mode().Perm() != 0o755 {
				t.Errorf("directory %s has mode %v; want 0755", rel, info.Mode().Perm())
			}
		case !info.Mode().IsRegular():
			t.Errorf("%s is a %v; want only regular files", rel, info.Mode().Type())
		case manPage.MatchString(rel):
			if info.Mode().Perm() != 0o644 {
				t.Errorf("%s has mode %v; want 0644", rel, info.Mode().Perm())
			}
			checkGzip(t, p)
			if _, ok := want[rel]; !ok {
				return nil // other subcommands' pages: present, right mode
			}
			got[rel] = info.Mode().Perm()
		default:
			got[rel] = info.Mode().Perm()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files in the .deb and their modes (-want +got):\n%s", diff)
	}
	checkGzip(t, filepath.Join(root, "usr/share/man/man5/legion.toml.5.gz"))

	// The example config is the repository's, which documents every key.
	shipped := readFile(t, filepath.Join(moduleRoot(t), "legion.toml"))
	if got := readFile(t, filepath.Join(root, "usr/share/doc/legion/legion.toml")); !bytes.Equal(got, shipped) {
		t.Errorf("usr/share/doc/legion/legion.toml differs from the repository's legion.toml")
	}
	page := gunzip(t, filepath.Join(root, "usr/share/man/man5/legion.toml.5.gz"))
	for _, s := range config.Schema {
		if !bytes.Contains(page, []byte(`\fB`+strings.ReplaceAll(s.Key, "-", `\-`)+`\fR (`)) {
			t.Errorf("the packaged legion.toml(5) does not document %s", s.Key)
		}
	}
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return data
}

func checkGzip(t *testing.T, path string) {
	t.Helper()
	if data := gunzip(t, path); !bytes.HasPrefix(data, []byte(".TH ")) {
		t.Errorf("%s does not hold a man page (starts %q)", path, data[:min(len(data), 20)])
	}
}

func checkControl(t *testing.T, deb string) {
	want := map[string]string{
		"Package":    "legion",
		"Version":    pkgVersion + "-1",
		"Depends":    "git, systemd",
		"Recommends": "tmux, dbus-user-session",
	}
	for field, w := range want {
		out, err := exec.CommandContext(t.Context(), "dpkg-deb", "-f", deb, field).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != w {
			t.Errorf("dpkg-deb -f %s = %q, %v; want %q", field, got, err, w)
		}
	}
}

// checkUnits: the packaged units are what `legion install --packaged`
// writes, every ExecStart= runs /usr/bin/legion, and nothing is enabled.
func checkUnits(t *testing.T, root string) {
	dir := filepath.Join(root, "usr/lib/systemd/user")
	for _, name := range []string{"legion.service", "legion@.service"} {
		var execs []string
		for _, line := range strings.Split(string(readFile(t, filepath.Join(dir, name))), "\n") {
			if strings.HasPrefix(line, "ExecStart=") {
				execs = append(execs, line)
			}
		}
		if len(execs) != 1 || !strings.HasPrefix(execs[0], "ExecStart=/usr/bin/legion ") {
			t.Errorf("%s: ExecStart lines %q; want one running /usr/bin/legion", name, execs)
		}
	}
	if data := readFile(t, filepath.Join(dir, "legion.socket")); !bytes.Contains(data, []byte("ListenStream=%t/legion/legion.sock")) {
		t.Errorf("legion.socket does not listen on %%t/legion/legion.sock:\n%s", data)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"legion.service", "legion.socket", "legion@.service"}; !slices.Equal(names, want) {
		t.Errorf("usr/lib/systemd/user holds %v; want %v (no .wants links: nothing enabled)", names, want)
	}
}

// checkManPages renders the packaged pages with man(1), if there, and
// wants no warnings.
func checkManPages(t *testing.T, root string) {
	if _, err := exec.LookPath("man"); err != nil {
		sdtest.Require(t, "man (Debian package man-db; scripts/check-deps installs it)", false)
	}
	pages, err := filepath.Glob(filepath.Join(root, "usr/share/man/man*/*.gz"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no man pages in the package (%v)", err)
	}
	for _, p := range pages {
		cmd := exec.CommandContext(t.Context(), "man", "--warnings=w", "-E", "UTF-8", "-l", p)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("man -l %s: %v\n%s", filepath.Base(p), err, stderr.String())
		}
	}
}

// verifyUnits runs verify-units.sh on the scratch root: systemd-analyze
// sees the package's units and binary at their installed paths through an
// overlay in a private mount namespace.
func verifyUnits(t *testing.T, root string) {
	sdtest.Require(t, "running as root (verify-units.sh mounts an overlay in a private mount namespace)", os.Geteuid() == 0)
	for _, tool := range []string{"systemd-analyze", "unshare", "mount"} {
		_, err := exec.LookPath(tool)
		sdtest.Require(t, tool+" in PATH", err == nil)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(moduleRoot(t), "packaging", "verify-units.sh"), root)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || stderr.Len() > 0 {
		t.Errorf("verify-units.sh %s: %v\nstdout:\n%s\nstderr:\n%s", root, err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "legion@verify.service") {
		t.Errorf("verify-units.sh did not verify the template through an instance; it said:\n%s", stdout.String())
	}
	if _, err := os.Stat("/usr/bin/legion"); err == nil {
		t.Logf("note: /usr/bin/legion exists on this host; the overlay hid it during verify")
	}
}

// checkArch lists the Arch package with tar (zstd) and reads .PKGINFO.
func checkArch(t *testing.T, pkg string) {
	if _, err := exec.LookPath("zstd"); err != nil {
		sdtest.Require(t, "zstd (Debian package zstd; scripts/check-deps installs it)", false)
	}
	list, err := exec.CommandContext(t.Context(), "tar", "--zstd", "-tf", pkg).Output()
	if err != nil {
		t.Fatalf("tar --zstd -tf %s: %v", pkg, err)
	}
	for _, want := range []string{"usr/bin/legion", "usr/lib/systemd/user/legion@.service", "usr/share/zsh/site-functions/_legion", ".PKGINFO"} {
		if !slices.Contains(strings.Fields(string(list)), want) {
			t.Errorf("Arch package lacks %s", want)
		}
	}
	info, err := exec.CommandContext(t.Context(), "tar", "--zstd", "-xOf", pkg, ".PKGINFO").Output()
	if err != nil {
		t.Fatalf("read .PKGINFO: %v", err)
	}
	for _, want := range []string{"pkgname = legion\n", "pkgver = " + pkgVersion + "-1\n", "depend = systemd\n"} {
		if !strings.Contains(string(info), want) {
			t.Errorf(".PKGINFO lacks %q:\n%s", want, info)
		}
	}
}
