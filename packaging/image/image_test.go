package image

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/units/sdtest"
)

// A missing input is an error naming the file and what makes it; no
// output file is left behind.
func TestWriteMissing(t *testing.T) {
	bins := t.TempDir()
	for _, b := range Binaries[:2] {
		if err := os.WriteFile(filepath.Join(bins, b), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		o    Options
		path string // $PATH, when not this process's
		want []string
	}{
		{"binary", Options{BinDir: bins}, "", []string{filepath.Join(bins, "legion-kube"), "make build"}},
		{"CLI", Options{BinDir: bins, CLIs: []CLI{{CLI: cliversion.Codex, Dir: filepath.Join(bins, "codex", "0.169.0")}}}, "",
			[]string{filepath.Join(bins, "codex", "0.169.0"), "Codex"}},
		{"git", Options{BinDir: bins}, t.TempDir(), []string{"git", "apt-get install git ca-certificates"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path != "" {
				t.Setenv("PATH", tc.path)
			}
			out := filepath.Join(t.TempDir(), "image.tar")
			_, err := Write(context.Background(), tc.o, "legion-worker:t", out)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Write = %v; want an error naming %s", err, w)
				}
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("stat %s = %v; want no file after a failed build", out, serr)
			}
		})
	}
}

// A script run through env has the interpreter, the program env runs and
// their libraries packed; a static program needs nothing.
func TestNeeds(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "cli")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := needs(context.Background(), script)
	if err != nil {
		t.Fatalf("needs(%s): %v", script, err)
	}
	joined := strings.Join(got, " ")
	if len(got) < 3 || got[0] != "/usr/bin/env" || filepath.Base(got[1]) != "sh" || !strings.Contains(joined, "libc.so") {
		t.Errorf("needs(#!/usr/bin/env sh) = %q; want /usr/bin/env, sh and libc", got)
	}
	static := filepath.Join(dir, "static")
	// glibc's ldconfig is a static program (ldd prints "statically linked").
	_, err = os.Stat("/sbin/ldconfig")
	sdtest.Require(t, "/sbin/ldconfig (glibc's, static)", err == nil)
	if err := os.Symlink("/sbin/ldconfig", static); err != nil {
		t.Fatal(err)
	}
	if got, err := needs(context.Background(), static); err != nil || len(got) != 0 {
		t.Errorf("needs(static ldconfig) = %q, %v; want nothing", got, err)
	}
}

// The host's git in the image: git, the exec path's remote helpers and
// dashed names the transports run (as symlinks to git or the helper), sh
// for the local transport, the libraries ldd names for them (libcurl's
// for git-remote-http) and libgcc_s.so.1, git's templates; nothing else of the exec path
// and never the host's /etc/gitconfig.
func TestAddGit(t *testing.T) {
	out, err := exec.Command("git", "--exec-path").Output()
	sdtest.Require(t, "git on $PATH (apt-get install git)", err == nil)
	execPath := strings.TrimPrefix(strings.TrimSpace(string(out)), "/")
	l := newLayer("git")
	if err := addGit(context.Background(), l); err != nil {
		t.Fatalf("addGit: %v", err)
	}
	want := map[string]string{ // name: symlink target, "" for a file
		"usr/bin/git":                              "",
		"bin/sh":                                   "",
		execPath + "/git-remote-http":              "",
		execPath + "/git-remote-https":             "git-remote-http",
		execPath + "/git":                          "/usr/bin/git",
		execPath + "/git-upload-pack":              "git",
		execPath + "/git-receive-pack":             "git",
		"usr/share/git-core/templates/description": "",
	}
	for name, target := range want {
		e, ok := l.entries[name]
		switch {
		case !ok:
			t.Errorf("layer has no %s", name)
		case target == "" && e.hdr.Typeflag != tar.TypeReg:
			t.Errorf("layer's %s is of type %q; want a regular file", name, e.hdr.Typeflag)
		case target != "" && (e.hdr.Typeflag != tar.TypeSymlink || e.hdr.Linkname != target):
			t.Errorf("layer's %s: type %q, link %q; want a symlink to %s", name, e.hdr.Typeflag, e.hdr.Linkname, target)
		}
	}
	var curl, gcc bool
	for name, e := range l.entries {
		if strings.HasPrefix(name, execPath+"/") {
			if _, ok := want[name]; !ok {
				t.Errorf("layer has %s; want only the exec path's programs of GitExecPrograms", name)
			}
		}
		if strings.Contains(path.Base(name), "libcurl") && e.hdr.Typeflag == tar.TypeReg {
			curl = true
		}
		if path.Base(name) == "libgcc_s.so.1" && e.hdr.Typeflag == tar.TypeReg {
			gcc = true
		}
		if e.hdr.Uid != 0 || e.hdr.Gid != 0 || !e.hdr.ModTime.Equal(epoch) {
			t.Errorf("layer's %s: owner %d:%d, time %v; want 0:0 at %v", name, e.hdr.Uid, e.hdr.Gid, e.hdr.ModTime, epoch)
		}
	}
	if !curl || !gcc {
		t.Errorf("layer has libcurl %v, libgcc_s.so.1 %v; want git-remote-http's libraries and the one glibc loads for threads", curl, gcc)
	}
	if _, ok := l.entries["etc/gitconfig"]; ok {
		t.Errorf("layer has etc/gitconfig; want none of the host's git configuration")
	}
}
