package claudecode

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var dbQuestion = []Item{{
	Question: "Which database should the service use?",
	Header:   "Database",
	Options: []Option{
		{Label: "PostgreSQL", Description: "Relational, already deployed"},
		{Label: "SQLite", Description: "Embedded, no server"},
	},
}}

func TestPendingQuestion(t *testing.T) {
	tests := []struct {
		file        string
		wantWaiting bool
		want        Question // Time is checked only for being set
	}{
		{"unanswered.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: dbQuestion}},
		{"answered.jsonl", false, Question{}},
		{"answered_last.jsonl", false, Question{}},
		{"interrupted.jsonl", false, Question{}},
		{"superseded.jsonl", false, Question{}},
		{"same_message_after.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: dbQuestion}},
		{"unknown_types.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: dbQuestion}},
		{"partial_last_line.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: dbQuestion}},
		{"complete_no_newline.jsonl", false, Question{}},
		{"malformed_middle.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: dbQuestion}},
		{"sidechain_after.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: dbQuestion}},
		{"answer_before_question.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: dbQuestion}},
		{"two_questions.jsonl", true, Question{ToolUseID: "toolu_03", MessageID: "msg_02", Questions: []Item{{
			Question: "Second?", Header: "Two", Options: dbQuestion[0].Options,
		}}}},
		{"old_question_new_turn.jsonl", true, Question{ToolUseID: "toolu_03", MessageID: "msg_03", Questions: []Item{{
			Question: "New?", Header: "Database", Options: dbQuestion[0].Options,
		}}}},
		{"no_question.jsonl", false, Question{}},
		{"single_form.jsonl", true, Question{ToolUseID: "toolu_02", MessageID: "msg_02", Questions: []Item{{
			Question: "Ship it?", Options: []Option{{Label: "yes"}},
		}}}},
		{"empty.jsonl", false, Question{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			got, waiting, err := PendingQuestion(path)
			if err != nil {
				t.Fatalf("PendingQuestion(%q): %v", path, err)
			}
			if waiting != tt.wantWaiting {
				t.Errorf("PendingQuestion(%q) waiting = %v; want %v", path, waiting, tt.wantWaiting)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Question{}, "Time")); diff != "" {
				t.Errorf("PendingQuestion(%q) question mismatch (-want +got):\n%s", path, diff)
			}
			if waiting && got.Time.IsZero() {
				t.Errorf("PendingQuestion(%q) question has no time", path)
			}

			// Every chunk size, including ones that split every line, and
			// the reference forward parse agree.
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			refQ, refWaiting := referencePending(data, MaxLineSize)
			if refWaiting != waiting || !cmp.Equal(refQ, got) {
				t.Errorf("referencePending(%q) = %+v, %v; PendingQuestion gave %+v, %v", path, refQ, refWaiting, got, waiting)
			}
			for _, chunk := range []int{1, 2, 3, 7, 64, 1000} {
				q, w, err := scanPending(bytes.NewReader(data), int64(len(data)), chunk, MaxLineSize)
				if err != nil {
					t.Fatalf("scanPending(chunk %d): %v", chunk, err)
				}
				if w != waiting || !cmp.Equal(q, got) {
					t.Errorf("scanPending(%q, chunk %d) = %+v, %v; want %+v, %v", path, chunk, q, w, got, waiting)
				}
			}
		})
	}
}

func TestPendingQuestionMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.jsonl")
	_, _, err := PendingQuestion(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("PendingQuestion(%q) error = %v; want fs.ErrNotExist", path, err)
	}
}

// TestPendingQuestionLongLines checks that lines over the limit are skipped,
// whether they precede the question, follow it or are the whole file.
func TestPendingQuestionLongLines(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "unanswered.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	answer := []byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_02","content":"` +
		string(bytes.Repeat([]byte("x"), 5000)) + `"}]}}` + "\n")
	newTurn := []byte(`{"type":"assistant","message":{"id":"msg_99","content":[{"type":"text","text":"` +
		string(bytes.Repeat([]byte("y"), 5000)) + `"}]}}` + "\n")
	tests := []struct {
		name    string
		data    []byte
		maxLine int
		want    bool
	}{
		{"long answer skipped", append(append([]byte{}, data...), answer...), 4096, true},
		{"long answer within limit", append(append([]byte{}, data...), answer...), 8192, false},
		{"long new turn skipped", append(append([]byte{}, data...), newTurn...), 4096, true},
		{"long new turn within limit", append(append([]byte{}, data...), newTurn...), 8192, false},
		{"long first line", append(append([]byte{}, newTurn...), data...), 4096, true},
		{"only a long line", newTurn, 4096, false},
		{"long unterminated last line", append(append([]byte{}, data...), answer[:len(answer)-1]...), 4096, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunk := range []int{5, 100, 4096, 1 << 16} {
				_, got, err := scanPending(bytes.NewReader(tt.data), int64(len(tt.data)), chunk, tt.maxLine)
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("scanPending(chunk %d, maxLine %d) waiting = %v; want %v", chunk, tt.maxLine, got, tt.want)
				}
				if _, ref := referencePending(tt.data, tt.maxLine); ref != tt.want {
					t.Errorf("referencePending(maxLine %d) waiting = %v; want %v", tt.maxLine, ref, tt.want)
				}
			}
		})
	}
}

func TestQuestionText(t *testing.T) {
	q := Question{Questions: []Item{{Question: "One?"}, {Question: "Two?"}}}
	if got, want := q.Text(), "One?\nTwo?"; got != want {
		t.Errorf("Text() = %q; want %q", got, want)
	}
}
