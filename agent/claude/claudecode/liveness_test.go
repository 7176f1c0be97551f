package claudecode

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const testSession = "227d823e-000c-589c-88f2-f41d3949ab71"

// writeAt writes content to path (creating directories) and sets its mtime.
func writeAt(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestLiveness(t *testing.T) {
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	mine := `{"type":"user","sessionId":"` + testSession + `","isSidechain":true}` + "\n"
	theirs := `{"type":"user","sessionId":"00000000-0000-0000-0000-000000000000","isSidechain":true}` + "\n"

	type file struct {
		rel     string // relative to the project dir; "S" is replaced by the session ID
		content string
		sec     int
	}
	tests := []struct {
		name  string
		files []file
		want  time.Time
	}{
		{"session only", nil, at(0)},
		{"subagent newer", []file{{"S/subagents/agent-a1.jsonl", "{}\n", 30}}, at(30)},
		{"subagent older", []file{{"S/subagents/agent-a1.jsonl", "{}\n", -30}}, at(0)},
		{"newest of several subagents", []file{
			{"S/subagents/agent-a1.jsonl", "{}\n", 10},
			{"S/subagents/agent-a2.jsonl", "{}\n", 20},
		}, at(20)},
		{"non-jsonl in subagents ignored", []file{{"S/subagents/notes.txt", "x", 40}}, at(0)},
		{"old layout, this session", []file{{"agent-1234abcd.jsonl", mine, 50}}, at(50)},
		{"old layout, other session", []file{{"agent-1234abcd.jsonl", theirs, 50}}, at(0)},
		{"old layout, partial first line", []file{{"agent-1234abcd.jsonl", `{"sessionId":"` + testSession, 50}}, at(0)},
		{"old layout, first line without newline", []file{{"agent-1234abcd.jsonl", mine[:len(mine)-1], 50}}, at(50)},
		{"old layout, empty", []file{{"agent-1234abcd.jsonl", "", 50}}, at(0)},
		{"another session file is not ours", []file{{"00000000-0000-0000-0000-000000000000.jsonl", mine, 60}}, at(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			session := filepath.Join(dir, testSession+".jsonl")
			writeAt(t, session, "{}\n", at(0))
			for _, f := range tt.files {
				rel := f.rel
				if len(rel) > 1 && rel[:2] == "S/" {
					rel = testSession + rel[1:]
				}
				writeAt(t, filepath.Join(dir, rel), f.content, at(f.sec))
			}
			got, err := Liveness(session)
			if err != nil {
				t.Fatalf("Liveness(%q): %v", session, err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("Liveness(%q) = %v; want %v", session, got, tt.want)
			}
		})
	}
}

func TestLivenessMissing(t *testing.T) {
	session := filepath.Join(t.TempDir(), testSession+".jsonl")
	_, err := Liveness(session)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Liveness(%q) error = %v; want fs.ErrNotExist", session, err)
	}
}

func TestLivenessAdvances(t *testing.T) {
	dir := t.TempDir()
	session := filepath.Join(dir, testSession+".jsonl")
	writeAt(t, session, "{}\n", time.Now().Add(-time.Hour))
	before, err := Liveness(session)
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(SubagentDir(session), "agent-x.jsonl")
	writeAt(t, sub, "{}\n", time.Now())
	after, err := Liveness(session)
	if err != nil {
		t.Fatal(err)
	}
	if !after.After(before) {
		t.Errorf("Liveness after a subagent write = %v; want after %v", after, before)
	}
}
