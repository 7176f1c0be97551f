package graphql

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// Secret is a client's credential as messages name it. Load reads it from
// an environment variable or a private file.
type Secret struct {
	// Prefix starts every error ("linear").
	Prefix string
	// Name is what the secret is ("API key", "token"); Short is its name
	// in short phrases ("key", "token").
	Name, Short string
	// File is what a file holding it is called ("credentials file").
	File string
}

// Load returns the secret from the environment variable env or, when that
// is unset or empty, from file (skipped when ""): the file's first line
// that is neither empty nor a # comment. A file readable by group or
// others is refused. The error names both sources when neither has the
// secret; it never contains the secret.
func (s Secret) Load(env, file string) (string, error) { return s.LoadWith(os.Getenv, env, file) }

// LoadWith is Load with the environment variable looked up by getenv, for
// a caller that reads another process's environment (legion doctor reads
// the user manager's, which the controller gets).
func (s Secret) LoadWith(getenv func(string) string, env, file string) (string, error) {
	if env != "" {
		if k := strings.TrimSpace(getenv(env)); k != "" {
			return k, nil
		}
	}
	if file != "" {
		k, err := s.readFile(file)
		if err == nil {
			return k, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %s: %w", s.Prefix, s.Name, err)
		}
	}
	if file == "" {
		return "", fmt.Errorf("%s: no %s: set $%s or configure a %s", s.Prefix, s.Name, env, s.File)
	}
	if env == "" {
		return "", fmt.Errorf("%s: no %s: write the %s to %s (mode 0600)", s.Prefix, s.Name, s.Short, file)
	}
	return "", fmt.Errorf("%s: no %s: set $%s or write the %s to %s (mode 0600)", s.Prefix, s.Name, env, s.Short, file)
}

// Hint says where Load looked, for Options.AuthHint: "the API key in
// $LINEAR_API_KEY or /path/to/file".
func (s Secret) Hint(env, file string) string {
	h := "the " + s.Name + " in $" + env
	if file != "" {
		h += " or " + file
	}
	return h
}

// readFile reads a secret's file: its first line that is neither empty
// nor a # comment. It refuses files readable by group or others, but for
// a file of root's that others cannot read (rootGroupOnly).
func (s Secret) readFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && !rootGroupOnly(st, os.Getuid()) {
		return "", fmt.Errorf("%s %s has mode %04o: it must not be accessible by group or others (chmod 600 %s)", s.File, path, perm, path)
	}
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", fmt.Errorf("%s %s is empty: want the %s on its first line", s.File, path, s.Name)
	}
	for line := range strings.Lines(string(buf[:n])) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("%s %s has no %s: want the %s on its first line", s.File, path, s.Short, s.Name)
}

// rootGroupOnly reports whether fi, read by user me, is root's with no
// access for others and me is not root: a Kubernetes Secret volume's file
// in a session's pod (root-owned, mode 0440, readable through the pod's
// fsGroup), which only root could have shared with a group. Root's own
// files still need mode 0600.
func rootGroupOnly(fi os.FileInfo, me int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && me != 0 && st.Uid == 0 && fi.Mode().Perm()&0o007 == 0
}
