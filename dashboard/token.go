package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/legion-dev/legion/internal/privdir"
)

// TokenFile is the token's file name in Legion's state directory.
const TokenFile = "web-token"

// minTokenLen is the shortest token accepted (a generated one has 43
// characters: 32 random bytes, base64url).
const minTokenLen = 32

// LoadToken returns the dashboard's token kept at path, creating it (32
// random bytes, base64url, mode 0600, in a 0700 directory) on first use. A
// token file that others may read, or that is too short, is refused:
// remove it and a new one is made.
func LoadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return createToken(path)
	case err != nil:
		return "", fmt.Errorf("read the dashboard token: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("read the dashboard token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("dashboard token %s has mode %v: others may read it; remove the file (a new token is made on next use) or chmod 600 it", path, fi.Mode().Perm())
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < minTokenLen {
		return "", fmt.Errorf("dashboard token %s: want at least %d characters, got %d; remove the file and a new one is made", path, minTokenLen, len(tok))
	}
	return tok, nil
}

func createToken(path string) (string, error) {
	if err := privdir.Ensure(filepath.Dir(path)); err != nil {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make the dashboard token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	// Written aside, then linked into place: link fails when the file
	// exists, so two first uses at once agree on one token, and no reader
	// ever sees a half-written one.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".web-token-*")
	if err != nil {
		return "", fmt.Errorf("write the dashboard token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(tok + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write the dashboard token %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write the dashboard token %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadToken(path)
		}
		return "", fmt.Errorf("write the dashboard token: %w", err)
	}
	return tok, nil
}
