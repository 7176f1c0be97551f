package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/packaging/image"
	"github.com/legion-dev/legion/units/sdtest"
)

// The worker image, built twice by legion-kube image from freshly built
// binaries and two real pinned CLIs (Gemini CLI, a node script; Claude
// Code, a native program): the same bytes both times; read back with
// go-containerregistry, its config and files are what pods expect; and its
// layers, extracted into a directory, run Legion's programs, node and both
// CLIs under chroot as the image's user.
func TestImage(t *testing.T) {
	sdtest.Require(t, "running as root (chroot)", os.Geteuid() == 0)
	_, err := exec.LookPath("chroot")
	sdtest.Require(t, "chroot on $PATH", err == nil)
	cache := filepath.Join(sdtest.StartCacheDir, "legion")
	for _, c := range []cliversion.CLI{cliversion.Gemini, cliversion.Claude} {
		_, err := os.Stat(image.CacheDir(cache, c))
		sdtest.Require(t, c.Name+" "+c.Tested+" installed ("+c.Script+")", err == nil)
	}
	bin := sdtest.KubeBinary(t)
	dir := t.TempDir()
	build := func(out string) string {
		t.Helper()
		cmd := exec.Command(bin, "image", "--out", out, "--cli", "gemini,claude", "--cache", cache, "--name", "example.test/legion-worker:t")
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("legion-kube image --out %s: %v", out, err)
		}
		return strings.TrimSpace(string(b))
	}
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	da, db := build(a), build(b)
	if da != db || fileSum(t, a) != fileSum(t, b) {
		t.Fatalf("two builds: digests %s and %s, files differ: %v; want the same image", da, db, fileSum(t, a) != fileSum(t, b))
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("stat %s = %v, %v; want mode 0644", a, fi.Mode(), err)
	}

	lay := filepath.Join(dir, "layout")
	untar(t, openFile(t, a), lay)
	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != da {
		t.Fatalf("index.json lists %+v; want the one image %s", im.Manifests, da)
	}
	wantAnn := map[string]string{"org.opencontainers.image.ref.name": "t", "io.containerd.image.name": "example.test/legion-worker:t"}
	if diff := cmp.Diff(wantAnn, im.Manifests[0].Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "1000:1000" || c.WorkingDir != "/legion" || cf.OS != "linux" {
		t.Errorf("config user %q, workdir %q, os %q; want 1000:1000, /legion, linux", c.User, c.WorkingDir, cf.OS)
	}
	var path string
	for _, kv := range c.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range []string{"/usr/local/bin", "/opt/legion/gemini/" + cliversion.GeminiTested + "/node_modules/.bin", "/opt/legion/claude-code/" + cliversion.ClaudeTested + "/node_modules/.bin"} {
		if !strings.Contains(":"+path+":", ":"+d+":") {
			t.Errorf("config PATH %q; want %s in it", path, d)
		}
	}
	if c.Labels["dev.legion.cli.gemini"] != cliversion.GeminiTested || c.Labels["dev.legion.cli.claude"] != cliversion.ClaudeTested || c.Labels["dev.legion.node"] == "" {
		t.Errorf("config labels %v; want the CLIs' versions and node's", c.Labels)
	}

	root := filepath.Join(dir, "root")
	rc := mutate.Extract(img)
	defer rc.Close()
	untar(t, rc, root)
	for _, f := range []struct {
		name     string
		mode     os.FileMode
		uid, gid uint32
	}{
		{"usr/local/bin/legion", 0o755, 0, 0},
		{"usr/local/bin/legion-pty-worker", 0o755, 0, 0},
		{"usr/local/bin/legion-kube", 0o755, 0, 0},
		{"etc/passwd", 0o644, 0, 0},
		{"tmp", os.ModeDir | os.ModeSticky | 0o777, 0, 0},
		{"legion/home", os.ModeDir | 0o755, 1000, 1000},
	} {
		fi, err := os.Lstat(filepath.Join(root, f.name))
		if err != nil {
			t.Errorf("image file %s: %v", f.name, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != f.mode || st.Uid != f.uid || st.Gid != f.gid {
			t.Errorf("image file %s: mode %v, owner %d:%d; want %v, %d:%d", f.name, fi.Mode(), st.Uid, st.Gid, f.mode, f.uid, f.gid)
		}
	}
	if p, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || !bytes.Contains(p, []byte("\nlegion:x:1000:1000:Legion:/legion/home:")) {
		t.Errorf("image /etc/passwd = %q, %v; want user legion, uid 1000", p, err)
	}

	for _, tc := range []struct {
		argv []string
		want string // what the first line of output starts with
	}{
		{[]string{"legion-pty-worker", "--version"}, "legion-pty-worker "},
		{[]string{"legion", "version"}, "legion "},
		{[]string{"legion-kube", "--version"}, "legion-kube "},
		{[]string{"node", "--version"}, c.Labels["dev.legion.node"]},
		{[]string{"gemini", "--version"}, cliversion.Gemini.Want(cliversion.GeminiTested)},
		{[]string{"claude", "--version"}, cliversion.Claude.Want(cliversion.ClaudeTested)},
	} {
		t.Run(tc.argv[0], func(t *testing.T) {
			cmd := exec.Command("chroot", append([]string{"--userspec=1000:1000", root}, tc.argv...)...)
			cmd.Env = c.Env
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), tc.want) {
				t.Errorf("chroot %s %s = %q, %v; want %q", root, strings.Join(tc.argv, " "), out, err, tc.want)
			}
		})
	}
}

func openFile(t *testing.T, name string) io.Reader {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func fileSum(t *testing.T, name string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// untar writes the directories, regular files and symlinks of the tar
// stream r below dir, with their modes and owners.
func untar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(hdr.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("tar entry %q: want a relative path", hdr.Name)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, p); err != nil {
				t.Fatal(err)
			}
			continue
		default:
			t.Fatalf("tar entry %q: unexpected type %q", hdr.Name, hdr.Typeflag)
		}
		if err := os.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, uint32(hdr.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}
