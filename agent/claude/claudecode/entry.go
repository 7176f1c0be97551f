package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// AskUserQuestion is the name of Claude Code's tool for asking the human.
const AskUserQuestion = "AskUserQuestion"

// entry is what Legion reads of one session-file line. Every other field is
// ignored.
type entry struct {
	Type        string `json:"type"` // "user", "assistant", "system", "summary", ...
	IsSidechain bool   `json:"isSidechain"`
	Timestamp   string `json:"timestamp"`
	Message     struct {
		ID      string  `json:"id"`
		Content []block `json:"content"` // nil when content is a plain string
	} `json:"message"`
}

// block is one content block of a message.
type block struct {
	Type      string          `json:"type"` // "text", "tool_use", "tool_result", ...
	ID        string          `json:"id"`   // tool_use
	Name      string          `json:"name"` // tool_use
	ToolUseID string          `json:"tool_use_id"`
	Input     json.RawMessage `json:"input"` // tool_use
}

// decodeLenient decodes one JSON value into v, ignoring fields of the wrong
// type (encoding/json skips them and fills in the rest). It reports false
// when data is not one well-formed JSON value.
func decodeLenient(data []byte, v any) bool {
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	return err == nil || errors.As(err, &typeErr)
}

// maybeRelevant reports whether a line could matter to the pending-question
// state at all: an assistant line or one holding a tool_result. Both need the
// literal value "assistant" or "tool_result", unless the line spells it with
// \u escapes, so lines without any of the three are skipped undecoded. This
// is a filter for speed only; decodeLine decides.
func maybeRelevant(line []byte) bool {
	return bytes.Contains(line, []byte("assistant")) ||
		bytes.Contains(line, []byte("tool_result")) ||
		bytes.Contains(line, []byte(`\u`))
}

// decodeLine decodes a line that matters to the pending-question state:
// ok is false for malformed lines, sidechain lines (a subagent's own
// conversation; subagents cannot ask the human) and lines of any type other
// than "user" or "assistant".
func decodeLine(line []byte) (e entry, ok bool) {
	if !maybeRelevant(line) || !decodeLenient(line, &e) || e.IsSidechain {
		return entry{}, false
	}
	return e, e.Type == "user" || e.Type == "assistant"
}

// isQuestion reports whether b asks the human.
func (b block) isQuestion() bool { return b.Type == "tool_use" && b.Name == AskUserQuestion }

// isAnswer reports whether b is a tool result (for any tool_use ID).
func (b block) isAnswer() bool { return b.Type == "tool_result" }

// askInput is AskUserQuestion's input as Claude Code writes it, plus the
// single-question shape ({"question": ...}) some versions used.
type askInput struct {
	Questions   []askItem   `json:"questions"`
	Question    string      `json:"question"`
	Header      string      `json:"header"`
	Options     []askOption `json:"options"`
	MultiSelect bool        `json:"multiSelect"`
}

type askItem struct {
	Question    string      `json:"question"`
	Header      string      `json:"header"`
	Options     []askOption `json:"options"`
	MultiSelect bool        `json:"multiSelect"`
}

type askOption struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// question builds the Question of an AskUserQuestion block b found on line e.
// An input it cannot read still makes a Question (the agent waits all the
// same), just one without items.
func question(e entry, b block) Question {
	q := Question{ToolUseID: b.ID, MessageID: e.Message.ID}
	if t, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
		q.Time = t
	}
	var in askInput
	if len(b.Input) == 0 || !decodeLenient(b.Input, &in) {
		return q
	}
	items := in.Questions
	if len(items) == 0 && in.Question != "" {
		items = []askItem{{Question: in.Question, Header: in.Header, Options: in.Options, MultiSelect: in.MultiSelect}}
	}
	for _, it := range items {
		item := Item{Question: it.Question, Header: it.Header, MultiSelect: it.MultiSelect}
		for _, o := range it.Options {
			item.Options = append(item.Options, Option(o))
		}
		q.Questions = append(q.Questions, item)
	}
	return q
}
