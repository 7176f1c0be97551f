package claudecode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Liveness is the newest modification time among a session's files: the
// session file itself, every *.jsonl in SubagentDir(sessionFile) (Claude
// Code 2.x), and every agent-*.jsonl beside the session file that belongs to
// this session (the older layout, where subagents of all sessions of a
// project share its directory).
//
// An agent-*.jsonl file belongs to the session when its first complete line
// is a JSON object whose "sessionId" is the session's ID (the session file's
// base name without ".jsonl"). Only files newer than the newest time found so
// far are opened, and only their first line (at most 64 KiB) is read, so the
// check costs one directory listing per call when no old-layout file is
// fresh.
//
// A missing session file is an error that satisfies errors.Is(err,
// fs.ErrNotExist). Subagent files that vanish while being looked at, or a
// missing subagent directory, are not errors; other I/O errors are.
func Liveness(sessionFile string) (time.Time, error) {
	st, err := os.Stat(sessionFile)
	if err != nil {
		return time.Time{}, fmt.Errorf("session liveness: %w", err)
	}
	newest := st.ModTime()

	subDir := SubagentDir(sessionFile)
	entries, err := os.ReadDir(subDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, fmt.Errorf("session liveness: list subagents: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		mt, ok, err := modTime(e)
		if err != nil {
			return time.Time{}, fmt.Errorf("session liveness: subagent %s: %w", filepath.Join(subDir, e.Name()), err)
		}
		if ok && mt.After(newest) {
			newest = mt
		}
	}

	dir := filepath.Dir(sessionFile)
	id := strings.TrimSuffix(filepath.Base(sessionFile), ".jsonl")
	entries, err = os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, fmt.Errorf("session liveness: list %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, "agent-") || !strings.HasSuffix(name, ".jsonl") {
			continue
		}
		mt, ok, err := modTime(e)
		if err != nil {
			return time.Time{}, fmt.Errorf("session liveness: subagent %s: %w", filepath.Join(dir, name), err)
		}
		if !ok || !mt.After(newest) {
			continue
		}
		mine, err := firstLineSession(filepath.Join(dir, name), id)
		if err != nil {
			return time.Time{}, fmt.Errorf("session liveness: %w", err)
		}
		if mine {
			newest = mt
		}
	}
	return newest, nil
}

// modTime is e's modification time; ok is false when the file vanished
// since it was listed.
func modTime(e fs.DirEntry) (t time.Time, ok bool, err error) {
	info, err := e.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return info.ModTime(), true, nil
}

// firstLineLimit bounds how much of an old-layout subagent file is read to
// find its session ID.
const firstLineLimit = 64 << 10

// firstLineSession reports whether the first line of the file at path names
// session id in its "sessionId" field. A file that vanished is not the
// session's.
func firstLineSession(path, id string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, firstLineLimit).ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	var head struct {
		SessionID string `json:"sessionId"`
	}
	if !decodeLenient(line, &head) {
		return false, nil
	}
	return head.SessionID == id, nil
}
