package claudecode

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeBigSession writes a session file of about size bytes made of
// realistic turns (assistant tool_use, user tool_result of a few KiB),
// ending with tail.
func writeBigSession(b *testing.B, size int, tail string) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), testSession+".jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	output := strings.Repeat("ok  \tgithub.com/legion-dev/legion/units\t0.123s\\n", 80)
	n := 0
	for i := 0; n < size; i++ {
		k, _ := fmt.Fprintf(w, `{"parentUuid":"p%d","isSidechain":false,"userType":"external","cwd":"/home/u/w","sessionId":"%s","version":"2.0.14","type":"assistant","uuid":"a%d","timestamp":"2026-11-22T10:00:00.000Z","message":{"id":"msg_%d","type":"message","role":"assistant","model":"claude","content":[{"type":"tool_use","id":"toolu_%d","name":"Bash","input":{"command":"go test ./..."}}],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":2}}}`+"\n", i, testSession, i, i, i)
		n += k
		k, _ = fmt.Fprintf(w, `{"parentUuid":"a%d","isSidechain":false,"userType":"external","cwd":"/home/u/w","sessionId":"%s","version":"2.0.14","type":"user","uuid":"u%d","timestamp":"2026-11-22T10:00:01.000Z","message":{"role":"user","content":[{"tool_use_id":"toolu_%d","type":"tool_result","content":"%s","is_error":false}]}}`+"\n", i, testSession, i, i, output)
		n += k
	}
	w.WriteString(tail)
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

const benchSize = 50 << 20

const benchQuestion = `{"type":"assistant","isSidechain":false,"message":{"id":"msg_q","content":[{"type":"tool_use","id":"toolu_q","name":"AskUserQuestion","input":{"questions":[{"question":"Which?","header":"H","options":[{"label":"a"},{"label":"b"}],"multiSelect":false}]}}]}}` + "\n"

// BenchmarkPendingQuestion measures one call on a 50 MB session file: the
// usual case (a question at the end of a long session) and the worst case
// (no assistant line after the first, so the whole file is read).
func BenchmarkPendingQuestion(b *testing.B) {
	b.Run("50MB-question-at-end", func(b *testing.B) {
		path := writeBigSession(b, benchSize, benchQuestion)
		b.ResetTimer()
		for b.Loop() {
			if _, waiting, err := PendingQuestion(path); err != nil || !waiting {
				b.Fatalf("PendingQuestion = %v, %v", waiting, err)
			}
		}
	})
	b.Run("50MB-answered-then-work", func(b *testing.B) {
		path := writeBigSession(b, benchSize, benchQuestion+
			`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"a"}]}}`+"\n"+
			`{"type":"assistant","message":{"id":"msg_after","content":[{"type":"text","text":"ok"}]}}`+"\n")
		b.ResetTimer()
		for b.Loop() {
			if _, waiting, err := PendingQuestion(path); err != nil || waiting {
				b.Fatalf("PendingQuestion = %v, %v", waiting, err)
			}
		}
	})
	b.Run("50MB-worst-case-full-scan", func(b *testing.B) {
		// One assistant question, then 50 MB of user lines only.
		path := filepath.Join(b.TempDir(), testSession+".jsonl")
		var sb strings.Builder
		sb.WriteString(benchQuestion)
		line := `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"` + strings.Repeat("z", 4000) + `"}]}}` + "\n"
		for sb.Len() < benchSize {
			sb.WriteString(line)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(sb.Len()))
		b.ResetTimer()
		for b.Loop() {
			if _, waiting, err := PendingQuestion(path); err != nil || !waiting {
				b.Fatalf("PendingQuestion = %v, %v", waiting, err)
			}
		}
	})
	b.Run("50MB-reference-full-parse", func(b *testing.B) {
		path := writeBigSession(b, benchSize, benchQuestion)
		b.ResetTimer()
		for b.Loop() {
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, waiting := referencePending(data, MaxLineSize); !waiting {
				b.Fatal("not waiting")
			}
		}
	})
}

func BenchmarkLiveness(b *testing.B) {
	path := writeBigSession(b, 1<<10, "")
	sub := SubagentDir(path)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("agent-%d.jsonl", i)), []byte("{}\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := Liveness(path); err != nil {
			b.Fatal(err)
		}
	}
}
