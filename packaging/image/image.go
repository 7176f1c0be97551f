// Package image owns the recipe of the worker image: the OCI image a
// session's pod runs on a Kubernetes cluster (activation/kube's objects),
// built from scratch, without a Docker daemon or a base image, out of local
// files only: Legion's static binaries, the pinned agent CLIs as
// scripts/install-claude-code and scripts/install-agent-clis installed
// them in Legion's cache, the host programs and shared libraries those
// CLIs run on (node for a CLI that is a node script, the libraries a
// native CLI links), the host's git with what a pod's clone, worktree,
// commit, merge and push need over a path, file:// and http(s):// (git.go:
// a few programs of its exec path, /bin/sh, their libraries, its
// templates, the CA certificates), and a user legion (uid 1000) with its
// directories. The same inputs give the same image digest: every entry
// has a fixed time and owner, and layers list entries in order.
//
// It writes an OCI image layout as one tar file; it never pushes the
// image, never reaches a network and never runs a CLI it packs (only ldd
// on the host, to find the libraries a program links, and git
// --exec-path). It never packs the host's git configuration.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/legion-dev/legion/agent/cliversion"
)

// Binaries are Legion's programs the image holds, in /usr/local/bin.
var Binaries = []string{"legion", "legion-pty-worker", "legion-kube"}

// The image's user, as activation/kube's pods run it.
const (
	UID     = 1000
	GID     = 1000
	Home    = "/legion/home"
	WorkDir = "/legion"
	// CLIRoot holds each CLI's cache directory, <name>/<version>, as it
	// is in Legion's cache on the host.
	CLIRoot = "/opt/legion"
)

// epoch is every entry's time and the image's creation time: the image
// depends on its inputs only.
var epoch = time.Unix(0, 0).UTC()

// CLI is one agent CLI to pack.
type CLI struct {
	cliversion.CLI
	// Dir is its install directory on the host, e.g.
	// ~/.cache/legion/codex/0.169.0, packed as CLIRoot/codex/0.169.0.
	Dir string
}

// Options say what goes into the image.
type Options struct {
	// BinDir holds Binaries, built static (make build).
	BinDir string
	// CLIs are the agent CLIs to pack; none is allowed.
	CLIs []CLI
	// Version is Legion's version, for the image's labels.
	Version string
	// Arch is the image's architecture (GOARCH spelling); runtime.GOARCH
	// when empty. The host's programs must be of it.
	Arch string
}

// CacheDir is the directory of an installed CLI in Legion's cache
// (cache: ${XDG_CACHE_HOME:-~/.cache}/legion), as the install scripts lay
// it out.
func CacheDir(cache string, c cliversion.CLI) string {
	name := c.Kind
	if c.Kind == cliversion.Claude.Kind {
		name = "claude-code"
	}
	return filepath.Join(cache, name, c.Tested)
}

// build makes the image, its layers' tar files in tmp: a layer with the user and its directories, one
// with the host programs and libraries the CLIs need, one per CLI, and
// Legion's binaries last (they change most often).
func build(ctx context.Context, o Options, tmp string) (v1.Image, error) {
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   "legion-worker",
		"org.opencontainers.image.version": o.Version,
	}
	base := newLayer("base: user legion, /legion, /tmp, nsswitch.conf, CA certificates")
	base.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nlegion:x:1000:1000:Legion:"+Home+":/sbin/nologin\n"))
	base.file("etc/group", 0o644, []byte("root:x:0:\nlegion:x:1000:\n"))
	// Names from /etc/hosts (the kubelet's, with the pod's hostAliases)
	// before DNS, as Debian's; without the file glibc (git's libcurl)
	// asks DNS first.
	base.file("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	base.dirOwned("legion", 0o755, UID, GID)
	base.dirOwned("legion/home", 0o755, UID, GID)
	base.dir("tmp", 0o1777)
	base.dir("run/legion-spec", 0o755)
	if err := base.hostFile(CACerts); err != nil {
		return nil, fmt.Errorf("the CA certificates: %w; install them with %s", err, gitInstall)
	}

	host := newLayer("host programs and libraries: git, what the agent CLIs run on")
	if err := addGit(ctx, host); err != nil {
		return nil, err
	}
	var cliLayers []*layer
	pathDirs := []string{"/usr/local/bin", "/usr/bin", "/bin"}
	for _, c := range o.CLIs {
		l := newLayer(fmt.Sprintf("%s %s", c.Name, c.Tested))
		rel, err := filepath.Rel(filepath.Dir(filepath.Dir(c.Dir)), c.Dir)
		if err != nil {
			return nil, err
		}
		dst := path.Join(strings.TrimPrefix(CLIRoot, "/"), filepath.ToSlash(rel))
		if err := l.tree(c.Dir, dst); err != nil {
			return nil, fmt.Errorf("pack %s from %s: %w; install it with %s", c.Name, c.Dir, err, c.Script)
		}
		bin := filepath.Join(c.Dir, "node_modules", ".bin", c.Program)
		runsOn, err := needs(ctx, bin)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w; install it with %s", c.Name, bin, err, c.Script)
		}
		for _, p := range runsOn {
			if err := host.hostFile(p); err != nil {
				return nil, fmt.Errorf("%s needs %s: %w", c.Name, p, err)
			}
		}
		if v, err := hostVersion(ctx, runsOn); err == nil && v != "" {
			labels["dev.legion.node"] = v
		}
		labels["dev.legion.cli."+c.Kind] = c.Tested
		pathDirs = append(pathDirs, "/"+dst+"/node_modules/.bin")
		cliLayers = append(cliLayers, l)
	}

	bins := newLayer("Legion " + o.Version)
	for _, b := range Binaries {
		src := filepath.Join(o.BinDir, b)
		if err := bins.copyFile(src, "usr/local/bin/"+b); err != nil {
			return nil, fmt.Errorf("legion's binaries (make build): %w", err)
		}
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	all := append(append([]*layer{base, host}, cliLayers...), bins)
	for _, l := range all {
		if len(l.entries) == 0 {
			continue
		}
		layer, err := l.v1(tmp)
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", l.what, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "legion-kube image", Comment: l.what},
		})
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", l.what, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: epoch}
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		WorkingDir: WorkDir,
		Env:        []string{"PATH=" + strings.Join(pathDirs, ":"), "HOME=" + Home},
		Cmd:        []string{"legion-pty-worker", "--spec", "/run/legion-spec/spec.json"},
		Labels:     labels,
	}
	return mutate.ConfigFile(img, cf)
}

// needs is what the program at bin (a CLI's node_modules/.bin entry)
// runs on from the host, as absolute paths: for a native program the
// shared libraries it links; for a script its interpreter (and, for
// `#!/usr/bin/env PROG`, PROG from $PATH) and their libraries.
func needs(ctx context.Context, bin string) ([]string, error) {
	f, err := os.Open(bin)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("read %s: %w", bin, err)
	}
	head = head[:n]
	if bytes.HasPrefix(head, []byte("\x7fELF")) {
		return libraries(ctx, bin)
	}
	interp, arg, err := ParseShebang(head)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	progs := []string{interp}
	if path.Base(interp) == "env" && arg != "" {
		p, err := exec.LookPath(arg)
		if err != nil {
			return nil, fmt.Errorf("%s runs %s, not found on this host: %w", bin, arg, err)
		}
		if p, err = filepath.Abs(p); err != nil {
			return nil, err
		}
		progs = append(progs, p)
	}
	out := progs
	for _, p := range progs {
		libs, err := libraries(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, libs...)
	}
	return out, nil
}

// libraries runs ldd on program and returns the libraries it names;
// none for a static program.
func libraries(ctx context.Context, program string) ([]string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ldd", program)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if bytes.Contains(append(out, stderr.Bytes()...), []byte("not a dynamic executable")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", program, err, bytes.TrimSpace(stderr.Bytes()))
	}
	libs, err := ParseLdd(string(out))
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", program, err)
	}
	return libs, nil
}

// hostVersion is `node --version` when node is among progs.
func hostVersion(ctx context.Context, progs []string) (string, error) {
	for _, p := range progs {
		if path.Base(p) == "node" {
			out, err := exec.CommandContext(ctx, p, "--version").Output()
			return strings.TrimSpace(string(out)), err
		}
	}
	return "", nil
}

// entry is one tar entry of a layer: a directory, a file with its
// content read from src (or data), or a symlink.
type entry struct {
	hdr  tar.Header
	src  string
	data []byte
}

// layer collects entries by their path in the image (no leading slash)
// and writes them sorted.
type layer struct {
	what    string
	entries map[string]entry
}

func newLayer(what string) *layer { return &layer{what: what, entries: map[string]entry{}} }

func (l *layer) add(e entry) {
	e.hdr.ModTime = epoch
	e.hdr.Format = tar.FormatPAX
	for d := path.Dir(e.hdr.Name); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := l.entries[d]; !ok {
			l.entries[d] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}}
		}
	}
	l.entries[e.hdr.Name] = e
}

func (l *layer) dir(name string, mode int64) { l.dirOwned(name, mode, 0, 0) }

func (l *layer) dirOwned(name string, mode int64, uid, gid int) {
	l.add(entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: gid}})
}

func (l *layer) file(name string, mode int64, data []byte) {
	l.add(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data})
}

// symlink adds name as a symlink to target.
func (l *layer) symlink(name, target string) {
	l.add(entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}})
}

// copyFile adds the regular file src (symlinks followed) as name.
func (l *layer) copyFile(src, name string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	l.add(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size()}, src: src})
	return nil
}

// hostFile adds the host's file at the same absolute path.
func (l *layer) hostFile(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%q is not an absolute path", p)
	}
	return l.copyFile(p, strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/"))
}

// tree adds the directory src as dst, keeping symlinks as they are; it
// skips nothing but sockets, devices and pipes (an error).
func (l *layer) tree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := path.Join(dst, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := int64(fi.Mode().Perm())
		switch {
		case d.IsDir():
			l.dir(name, mode)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			l.symlink(name, target)
		case fi.Mode().IsRegular():
			l.add(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: fi.Size()}, src: p})
		default:
			return fmt.Errorf("%s: want a file, directory or symlink, found %s", p, fi.Mode().Type())
		}
		return nil
	})
}

// v1 writes the layer's tar into the directory tmp (which the caller
// removes once the image is written) and makes it a gzip-compressed OCI
// layer.
func (l *layer) v1(tmp string) (v1.Layer, error) {
	f, err := os.CreateTemp(tmp, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	if err := l.write(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(f.Name(), tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
}

func (l *layer) write(w io.Writer) error {
	names := make([]string, 0, len(l.entries))
	for n := range l.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := l.entries[n]
		hdr := e.hdr
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if e.src != "" {
			f, err := os.Open(e.src)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, io.LimitReader(f, hdr.Size))
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", e.src, err)
			}
			continue
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
