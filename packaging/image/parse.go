package image

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ParseLdd returns the libraries ldd's output names, as absolute paths,
// each once, in the order printed: the path after "=>" of a line "NAME
// => PATH (ADDRESS)", or the first field of a line "PATH (ADDRESS)" (the
// dynamic loader). The kernel's vDSO (a line without a path) is skipped.
// A library ldd could not find ("NAME => not found") is an error naming
// it.
func ParseLdd(out string) ([]string, error) {
	var libs []string
	seen := map[string]bool{}
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "statically linked" {
			continue
		}
		name, p, arrow := strings.Cut(line, "=>")
		if !arrow {
			p = name
		}
		p = strings.TrimSpace(p)
		if p == "not found" {
			return nil, fmt.Errorf("library %s not found on this host", strings.TrimSpace(name))
		}
		if f := strings.Fields(p); len(f) > 0 {
			p = f[0]
		} else {
			p = ""
		}
		if !filepath.IsAbs(p) {
			if arrow && p != "" && !strings.HasPrefix(p, "(") {
				return nil, fmt.Errorf("ldd line %q: want NAME => /PATH (ADDRESS)", line)
			}
			continue // linux-vdso.so.1 (0x...) or "NAME => (0x...)"
		}
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			libs = append(libs, p)
		}
	}
	return libs, nil
}

// ParseShebang returns the interpreter and its one optional argument of a
// script that starts with "#!" (as Linux reads it: the rest of the first
// line, the interpreter up to the first blank, the argument the rest,
// trimmed). head is the script's start; the first line must end in it.
func ParseShebang(head []byte) (interp, arg string, err error) {
	rest, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		return "", "", errors.New("neither an ELF program nor a #! script")
	}
	line, _, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return "", "", errors.New("the #! line does not end within its first 256 bytes")
	}
	s := strings.Trim(string(line), " \t\r")
	interp, arg, _ = strings.Cut(s, " ")
	if i := strings.IndexByte(interp, '\t'); i >= 0 {
		interp, arg = interp[:i], interp[i+1:]+" "+arg
	}
	arg = strings.Trim(arg, " \t\r")
	if !filepath.IsAbs(interp) || filepath.Clean(interp) != interp {
		return "", "", fmt.Errorf("#! line %q: want an absolute interpreter path", s)
	}
	return interp, arg, nil
}
