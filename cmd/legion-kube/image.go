package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/packaging/image"
)

// imageCmd is `legion-kube image --out FILE.tar [--cli KINDS] [--bin DIR]
// [--name NAME]`: the worker image (package packaging/image) as an OCI
// image layout in one tar file; it prints the image's digest.
func imageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("legion-kube image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "the tar file to write (an OCI image layout)")
	clis := fs.String("cli", "claude,codex,gemini,opencode", `the agent CLIs to pack, by kind, comma-separated ("" for none)`)
	bin := fs.String("bin", "", "the directory of legion, legion-pty-worker and legion-kube (default: this program's, else ./bin)")
	name := fs.String("name", "legion-worker:"+version, "the image's name in the layout's index (what ctr images import calls it)")
	cache := fs.String("cache", "", "Legion's cache, where the install scripts put the CLIs (default ${XDG_CACHE_HOME:-~/.cache}/legion)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "legion-kube image: want --out FILE.tar [--cli KIND,...] [--bin DIR] [--name NAME]")
		return 2
	}
	o := image.Options{BinDir: *bin, Version: version}
	if o.BinDir == "" {
		o.BinDir = binDir()
	}
	if *cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			fmt.Fprintln(stderr, "legion-kube image:", err)
			return 1
		}
		*cache = filepath.Join(dir, "legion")
	}
	for kind := range strings.SplitSeq(*clis, ",") {
		if kind = strings.TrimSpace(kind); kind == "" {
			continue
		}
		c, ok := cliversion.For(kind)
		if !ok {
			fmt.Fprintf(stderr, "legion-kube image: --cli: unknown kind %q; want claude, codex, gemini or opencode\n", kind)
			return 2
		}
		o.CLIs = append(o.CLIs, image.CLI{CLI: c, Dir: image.CacheDir(*cache, c)})
	}
	digest, err := image.Write(ctx, o, *name, *out)
	if err != nil {
		fmt.Fprintln(stderr, "legion-kube image:", err)
		return 1
	}
	fmt.Fprintln(stdout, digest)
	return 0
}

// binDir is where Legion's binaries are: beside this program when legion
// is there (make install, or bin/ after make build), else ./bin.
func binDir() string {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(dir, "legion")); err == nil {
			return dir
		}
	}
	return "bin"
}
