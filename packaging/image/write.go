package image

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Write builds the image o describes and writes it to out as an OCI image
// layout in one tar file (oci-layout, index.json, blobs/sha256/…), the
// form `skopeo copy oci-archive:FILE`, `crane push` (after untarring it:
// crane takes the layout directory) and `ctr images import` read. The
// index names the image name (e.g. registry.example/legion-worker:1.2.0):
// the annotation org.opencontainers.image.ref.name holds its tag,
// io.containerd.image.name all of it. It returns the image's digest (its
// manifest's). out is replaced only once the image is complete.
func Write(ctx context.Context, o Options, name, out string) (v1.Hash, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".legion-image-*")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", out, err)
	}
	defer os.RemoveAll(tmp)
	img, err := build(ctx, o, tmp)
	if err != nil {
		return v1.Hash{}, err
	}
	dir := filepath.Join(tmp, "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", out, err)
	}
	tag := name
	if i := strings.LastIndexAny(name, ":/"); i >= 0 && name[i] == ':' {
		tag = name[i+1:]
	}
	err = p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          name,
	}))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", out, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	f, err := os.CreateTemp(tmp, "image-*.tar")
	if err != nil {
		return v1.Hash{}, err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return v1.Hash{}, fmt.Errorf("write %s: %w", out, err)
	}
	if err := tarDir(f, dir); err != nil {
		f.Close()
		return v1.Hash{}, fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", out, err)
	}
	return digest, nil
}

// tarDir writes the regular files and directories below dir to w,
// sorted, with fixed times and owners.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: want a regular file in the image layout", p)
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
