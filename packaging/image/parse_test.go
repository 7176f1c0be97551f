package image

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// What ldd printed for /usr/bin/node and Claude Code's native binary on
// this machine (Debian, glibc), and lines it prints in other cases.
func TestParseLdd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		out     string
		want    []string
		wantErr string
	}{
		{name: "node", out: `	linux-vdso.so.1 (0x00007f56e4d2a000)
	libdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007f56e4d13000)
	libstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f56e4a00000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f56e47fe000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f56e4d2c000)
`, want: []string{"/lib/x86_64-linux-gnu/libdl.so.2", "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}},
		{name: "twice", out: "libc.so.6 => /lib/libc.so.6 (0x1)\nlibc.so.6 => /lib/libc.so.6 (0x1)\n", want: []string{"/lib/libc.so.6"}},
		{name: "static", out: "\tstatically linked\n", want: nil},
		{name: "vdso without path", out: "linux-vdso.so.1 =>  (0x00007fff)\n", want: nil},
		{name: "not found", out: "libfoo.so.1 => not found\n", wantErr: "library libfoo.so.1 not found"},
		{name: "relative", out: "libfoo.so.1 => lib/libfoo.so.1 (0x1)\n", wantErr: "want NAME => /PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLdd(tc.out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseLdd(%q) = %v, %v; want error with %q", tc.out, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLdd(%q): %v", tc.out, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseLdd(%q) (-want +got):\n%s", tc.out, diff)
			}
		})
	}
}

func FuzzParseLdd(f *testing.F) {
	f.Add("\tlinux-vdso.so.1 (0x1)\n\tlibc.so.6 => /lib/libc.so.6 (0x2)\n\t/lib64/ld.so (0x3)\n")
	f.Add("libfoo.so.1 => not found\n")
	f.Fuzz(func(t *testing.T, out string) {
		libs, err := ParseLdd(out)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, l := range libs {
			if !filepath.IsAbs(l) || filepath.Clean(l) != l || seen[l] {
				t.Fatalf("ParseLdd(%q) = %q: %q is not a new clean absolute path", out, libs, l)
			}
			seen[l] = true
		}
	})
}

// The #! lines of the pinned CLIs' scripts (Gemini CLI's bundle/gemini.js,
// Codex's bin/codex.js) and the cases Linux reads differently.
func TestParseShebang(t *testing.T) {
	for _, tc := range []struct {
		name, head       string
		interp, arg, err string
	}{
		{name: "env node", head: "#!/usr/bin/env node\n// rest", interp: "/usr/bin/env", arg: "node"},
		{name: "no arg", head: "#!/bin/sh\nexit 0\n", interp: "/bin/sh"},
		{name: "blanks and CR", head: "#!  /usr/bin/env   node -x \r\n", interp: "/usr/bin/env", arg: "node -x"},
		{name: "tab", head: "#!/usr/bin/env\tnode\n", interp: "/usr/bin/env", arg: "node"},
		{name: "not a script", head: "MZ...", err: "neither an ELF program nor a #! script"},
		{name: "no end of line", head: "#!/usr/bin/env node", err: "does not end"},
		{name: "relative", head: "#!node\n", err: "want an absolute interpreter path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			interp, arg, err := ParseShebang([]byte(tc.head))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseShebang(%q) = %q, %q, %v; want error with %q", tc.head, interp, arg, err, tc.err)
				}
				return
			}
			if err != nil || interp != tc.interp || arg != tc.arg {
				t.Errorf("ParseShebang(%q) = %q, %q, %v; want %q, %q", tc.head, interp, arg, err, tc.interp, tc.arg)
			}
		})
	}
}

func FuzzParseShebang(f *testing.F) {
	f.Add([]byte("#!/usr/bin/env node\n"))
	f.Add([]byte("#!/bin/sh\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		interp, arg, err := ParseShebang(head)
		if err != nil {
			return
		}
		if !filepath.IsAbs(interp) || filepath.Clean(interp) != interp || strings.ContainsAny(interp, " \t\n") || strings.Contains(arg, "\n") {
			t.Fatalf("ParseShebang(%q) = %q, %q: want a clean absolute interpreter and a one-line argument", head, interp, arg)
		}
	})
}
