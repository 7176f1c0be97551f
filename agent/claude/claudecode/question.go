package claudecode

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Question is an AskUserQuestion the agent is waiting on.
type Question struct {
	ToolUseID string    `json:"tool_use_id"` // the ID an answer's tool_result names
	MessageID string    `json:"message_id"`  // the assistant message that asked
	Time      time.Time `json:"time"`        // when it was asked; zero if the line had no valid timestamp
	Questions []Item    `json:"questions"`   // empty if the tool input was unreadable
}

// Item is one question of an AskUserQuestion call.
type Item struct {
	Question    string   `json:"question"`
	Header      string   `json:"header,omitempty"`
	Options     []Option `json:"options,omitempty"`
	MultiSelect bool     `json:"multi_select,omitempty"`
}

// Option is one offered answer.
type Option struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Text is the questions' text, one per line, for a comment or a status line.
func (q Question) Text() string {
	var lines []string
	for _, it := range q.Questions {
		lines = append(lines, it.Question)
	}
	return strings.Join(lines, "\n")
}

// Tuning of the backward scan. MaxLineSize bounds the memory one line may
// take; longer lines (huge tool results, pasted images) are skipped like
// malformed ones.
const (
	chunkSize   = 64 << 10
	MaxLineSize = 32 << 20
)

// PendingQuestion reports whether the agent whose session file is
// sessionFile waits on a human, and the question it asked.
//
// The rule, over the file's lines in order (malformed lines, lines longer
// than MaxLineSize, sidechain lines and entry types other than "user" and
// "assistant" are skipped; a half-written last line is malformed):
//
//   - The current assistant message is the one of the last assistant line.
//     Claude Code writes one line per content block, all with the same
//     message.id, so the message is the run of assistant lines sharing that
//     id back to the previous assistant line with another id.
//   - Each AskUserQuestion tool_use in the current message is pending unless
//     a later user line holds a tool_result with its tool_use_id (an answer,
//     a rejection or an interrupt all count).
//   - waiting is true when any is pending; q is the earliest pending one.
//
// So a question followed by an assistant message with another id is no
// longer pending: the agent has moved on (after a resume, say), and treating
// it as waiting would keep a stale agent's watchdog fed forever.
//
// The file is read backwards from its end in 64 KiB chunks, and reading
// stops at the start of the current assistant message, so a call costs about
// the size of the last turn, not of the file. Callers that poll can check
// Liveness first: a fresh file needs no question check.
//
// A missing file is an error satisfying errors.Is(err, fs.ErrNotExist).
func PendingQuestion(sessionFile string) (q Question, waiting bool, err error) {
	f, err := os.Open(sessionFile)
	if err != nil {
		return Question{}, false, fmt.Errorf("pending question: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Question{}, false, fmt.Errorf("pending question: %w", err)
	}
	q, waiting, err = scanPending(f, st.Size(), chunkSize, MaxLineSize)
	if err != nil {
		return Question{}, false, fmt.Errorf("pending question: read %s: %w", sessionFile, err)
	}
	return q, waiting, nil
}

// scanPending applies PendingQuestion's rule to the first size bytes of r,
// reading backwards chunk bytes at a time and skipping lines longer than
// maxLine.
func scanPending(r io.ReaderAt, size int64, chunk, maxLine int) (Question, bool, error) {
	lines := newBackwardLines(r, size, chunk, maxLine)
	answered := map[string]bool{} // tool_use IDs answered by lines after the current one
	var (
		inMessage bool   // an assistant line was seen
		msgID     string // its message.id
		pending   []Question
	)
	for {
		line, ok, err := lines.prev()
		if err != nil {
			return Question{}, false, err
		}
		if !ok {
			break
		}
		e, ok := decodeLine(line)
		if !ok {
			continue
		}
		if e.Type == "user" {
			for _, b := range e.Message.Content {
				if b.isAnswer() {
					answered[b.ToolUseID] = true
				}
			}
			continue
		}
		if inMessage && e.Message.ID != msgID {
			break // the start of the current message is passed
		}
		inMessage, msgID = true, e.Message.ID
		for _, b := range slices.Backward(e.Message.Content) {
			if b.isQuestion() && !answered[b.ID] {
				pending = append(pending, question(e, b))
			}
		}
	}
	if len(pending) == 0 {
		return Question{}, false, nil
	}
	return pending[len(pending)-1], true, nil // collected last-first
}

// backwardLines yields the '\n'-separated lines of r's first size bytes,
// last first. The segment after the last '\n' (a line still being written, or
// empty) is yielded too: decoding decides whether it is whole. Lines longer
// than maxLine are skipped without being held in memory.
type backwardLines struct {
	r        io.ReaderAt
	chunk    int
	maxLine  int
	win      []byte // file bytes [winStart, end of the next line to yield)
	winStart int64
	spare    []byte // the previous window's array, reused by extend
	done     bool
}

func newBackwardLines(r io.ReaderAt, size int64, chunk, maxLine int) *backwardLines {
	return &backwardLines{r: r, chunk: chunk, maxLine: maxLine, winStart: size}
}

// prev yields the line before the last one yielded; ok is false at the
// start of the file. The line is valid until the next call.
func (l *backwardLines) prev() (line []byte, ok bool, err error) {
	for !l.done {
		if i := bytes.LastIndexByte(l.win, '\n'); i >= 0 {
			line, l.win = l.win[i+1:], l.win[:i]
			if len(line) > l.maxLine {
				continue
			}
			return line, true, nil
		}
		if l.winStart == 0 {
			l.done = true
			if len(l.win) > l.maxLine {
				return nil, false, nil
			}
			return l.win, true, nil
		}
		var err error
		if len(l.win) > l.maxLine {
			err = l.skipLine()
		} else {
			err = l.extend()
		}
		if err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

// extend reads the bytes before the window into it. Reads grow with the
// window, so a line spanning many chunks costs O(n), not O(n²), in copying.
func (l *backwardLines) extend() error {
	n := min(int64(max(l.chunk, len(l.win))), l.winStart)
	start := l.winStart - n
	need := int(n) + len(l.win)
	buf := l.spare[:0]
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	if _, err := l.r.ReadAt(buf[:n], start); err != nil {
		return err
	}
	copy(buf[n:], l.win)
	l.spare = l.win[:0]
	l.win, l.winStart = buf, start
	return nil
}

// skipLine drops the window, which holds only the tail of a line longer
// than maxLine, and reads back chunk by chunk to the '\n' ending the line
// before it; the window then ends there. At the start of the file nothing
// is left to yield.
func (l *backwardLines) skipLine() error {
	buf := make([]byte, l.chunk)
	for pos := l.winStart; pos > 0; {
		n := min(int64(l.chunk), pos)
		start := pos - n
		if _, err := l.r.ReadAt(buf[:n], start); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			l.win, l.winStart = append([]byte(nil), buf[:i]...), start
			return nil
		}
		pos = start
	}
	l.win, l.winStart, l.done = nil, 0, true
	return nil
}
