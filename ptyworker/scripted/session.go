package scripted

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent/claude/claudecode"
)

// version is what the agent writes as Claude Code's "version".
const version = "0.0.0-legion-scripted"

// Subtypes of the agent's own system lines.
const (
	subtypeStep = "legion_script_step" // content "N: STEP"
	subtypeOnce = "legion_script_once" // content "N": line N's once-step ran
)

// line is one session-file line, with fields in Claude Code's order.
type line struct {
	ParentUUID              *string `json:"parentUuid"`
	IsSidechain             bool    `json:"isSidechain"`
	PromptID                string  `json:"promptId,omitempty"`
	UserType                string  `json:"userType"`
	Cwd                     string  `json:"cwd"`
	SessionID               string  `json:"sessionId"`
	Version                 string  `json:"version"`
	GitBranch               string  `json:"gitBranch"`
	AgentID                 string  `json:"agentId,omitempty"`
	Type                    string  `json:"type"`
	Subtype                 string  `json:"subtype,omitempty"`
	Content                 string  `json:"content,omitempty"`
	Level                   string  `json:"level,omitempty"`
	DurationMs              int64   `json:"durationMs,omitempty"`   // system turn_duration
	MessageCount            int     `json:"messageCount,omitempty"` // system turn_duration
	Message                 any     `json:"message,omitempty"`
	IsAPIErrorMessage       bool    `json:"isApiErrorMessage,omitempty"`
	Error                   string  `json:"error,omitempty"` // an API error message's kind
	APIErrorStatus          int     `json:"apiErrorStatus,omitempty"`
	APIErrorType            string  `json:"apiErrorType,omitempty"`
	Data                    any     `json:"data,omitempty"`
	ToolUseID               string  `json:"toolUseID,omitempty"`
	ParentToolUseID         string  `json:"parentToolUseID,omitempty"`
	ToolUseResult           any     `json:"toolUseResult,omitempty"`
	ToolDenialKind          string  `json:"toolDenialKind,omitempty"`
	ToolDenialBeforeRun     bool    `json:"toolDenialBeforeRun,omitempty"`
	SourceToolAssistantUUID string  `json:"sourceToolAssistantUUID,omitempty"`
	PermissionDecision      any     `json:"permissionDecision,omitempty"`
	UUID                    string  `json:"uuid"`
	Timestamp               string  `json:"timestamp"`
}

type userMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"` // a string, or []any of blocks
}

type assistantMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        map[string]int `json:"usage"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Name  string `json:"name"`
	Input any    `json:"input"`
}

type toolResultBlock struct {
	ToolUseID string `json:"tool_use_id"`
	Type      string `json:"type"`
	Content   any    `json:"content"` // a string, or []textBlock
	IsError   bool   `json:"is_error,omitempty"`
}

// toolResult is what a tool call ended with, as its user line records it.
type toolResult struct {
	content    any  // the tool_result block's content
	isError    bool // the block's is_error
	useResult  any  // the line's toolUseResult
	denialKind string
	permission any // the line's permissionDecision, nil for none
}

// Texts Claude Code writes for a tool call the person declined.
const (
	rejectedContent = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
	rejectedResult  = "User rejected tool use"
	interruptedText = "[Request interrupted by user for tool use]"
)

// rejected is the result of a tool call declined in its dialog (No, Esc).
var rejected = toolResult{content: rejectedContent, isError: true, useResult: rejectedResult, denialKind: "user-rejected"}

// transcript appends Claude-format lines to one JSONL file (the session's
// or a subagent's), chaining parentUuid. The file is created by the first
// write, as Claude Code creates a session file only once a prompt is
// submitted.
type transcript struct {
	path      string
	f         *os.File // nil until the first write
	create    bool     // the first write creates the file, which must not exist
	sessionID string
	cwd       string
	agentID   string // set for subagent files, whose lines are sidechain
	parent    string // uuid of the last line written, "" before the first
	promptID  string // the current prompt's ID, on its lines
	count     int    // lines written
	written   int    // bytes written: the context a next request would send
}

// Claude Code's words when a session cannot start (its stderr, exit 1).
func errSessionInUse(id uuid.UUID) error {
	return &ExitError{Code: 1, Message: fmt.Sprintf("Error: Session ID %s is already in use.", id)}
}

func errNoConversation(id uuid.UUID) error {
	return &ExitError{Code: 1, Message: fmt.Sprintf("No conversation found with session ID: %s", id)}
}

// openSession opens the session file for id: for a new session it must
// not exist yet (it is created by the first write), for a resumed one it
// must exist (it is appended to). It also returns the script lines whose
// once-steps already ran in this session.
func openSession(path string, id uuid.UUID, cwd string, resume bool) (*transcript, map[string]bool, error) {
	t := &transcript{path: path, sessionID: id.String(), cwd: cwd}
	done := map[string]bool{}
	if !resume {
		if _, err := os.Lstat(path); err == nil {
			return nil, nil, errSessionInUse(id)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("check session file: %w", err)
		}
		t.create = true
		return t, done, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, errNoConversation(id)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open session file: %w", err)
	}
	// Find the last line's uuid to chain on, and the once-steps done.
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), claudecode.MaxLineSize)
	for sc.Scan() {
		var l struct {
			UUID    string `json:"uuid"`
			Type    string `json:"type"`
			Subtype string `json:"subtype"`
			Content string `json:"content"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // lenient, like every reader of these files
		}
		if l.UUID != "" {
			t.parent = l.UUID
		}
		if l.Type == "system" && l.Subtype == subtypeOnce {
			done[l.Content] = true
		}
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read session file %s: %w", path, err)
	}
	t.f = f
	return t, done, nil
}

// openSubagent creates the file of subagent agentID under the session's
// subagent directory, with its .meta.json beside it.
func openSubagent(sessionFile, sessionID, cwd, agentID string, meta any) (*transcript, error) {
	dir := claudecode.SubagentDir(sessionFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create subagent directory: %w", err)
	}
	path := filepath.Join(dir, "agent-"+agentID+".jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create subagent file: %w", err)
	}
	b, err := json.Marshal(meta)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "agent-"+agentID+".meta.json"), b, 0o600)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write subagent meta: %w", err)
	}
	return &transcript{path: path, f: f, sessionID: sessionID, cwd: cwd, agentID: agentID}, nil
}

func (t *transcript) Close() error {
	if t.f == nil {
		return nil
	}
	return t.f.Close()
}

// write appends l after filling in the common fields; each line is one
// write(2), so a reader never sees two lines interleaved.
func (t *transcript) write(l line) error {
	if t.f == nil {
		if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
			return fmt.Errorf("create session directory: %w", err)
		}
		f, err := os.OpenFile(t.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create session file %s: it appeared after the start: %w", t.path, err)
		}
		if err != nil {
			return fmt.Errorf("create session file: %w", err)
		}
		t.f = f
	}
	id := uuid.NewString()
	if t.parent != "" {
		p := t.parent
		l.ParentUUID = &p
	}
	l.IsSidechain = t.agentID != ""
	l.AgentID = t.agentID
	l.UserType = "external"
	l.Cwd = t.cwd
	l.SessionID = t.sessionID
	l.Version = version
	if l.Type == "user" {
		l.PromptID = t.promptID
	}
	l.UUID = id
	l.Timestamp = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode session line: %w", err)
	}
	if _, err := t.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", t.f.Name(), err)
	}
	t.parent = id
	t.count++
	t.written += len(b) + 1
	return nil
}

func (t *transcript) user(content any) error {
	return t.write(line{Type: "user", Message: userMessage{Role: "user", Content: content}})
}

func (t *transcript) toolResult(toolUseID string, r toolResult) error {
	return t.write(line{
		Type:                "user",
		Message:             userMessage{Role: "user", Content: []any{toolResultBlock{ToolUseID: toolUseID, Type: "tool_result", Content: r.content, IsError: r.isError}}},
		ToolUseResult:       r.useResult,
		ToolDenialKind:      r.denialKind,
		ToolDenialBeforeRun: r.denialKind == "user-rejected",
		PermissionDecision:  r.permission,
	})
}

// interrupted records that the person stopped the turn at a dialog.
func (t *transcript) interrupted() error {
	return t.user([]any{textBlock{Type: "text", Text: interruptedText}})
}

// turnDuration records the end of a turn that finished normally.
func (t *transcript) turnDuration(d time.Duration) error {
	return t.write(line{Type: "system", Subtype: "turn_duration", DurationMs: max(d.Milliseconds(), 1), MessageCount: t.count})
}

// apiError records a turn that failed at the API, as Claude Code's
// synthetic assistant message does.
func (t *transcript) apiError(kind, text string, status int, apiType string) error {
	return t.write(line{Type: "assistant", IsAPIErrorMessage: true, Error: kind, APIErrorStatus: status, APIErrorType: apiType, Message: assistantMessage{
		ID:      uuid.NewString(),
		Type:    "message",
		Role:    "assistant",
		Model:   "<synthetic>",
		Content: []any{textBlock{Type: "text", Text: text}},
		Usage:   map[string]int{"input_tokens": 0, "output_tokens": 0},
	}})
}

// assistant writes an assistant message with usage as a model would
// count it: the context so far in, the message out, about four bytes a
// token (so that readers of usage, such as the dashboard's tokens, see
// real sums).
func (t *transcript) assistant(blocks ...any) error {
	out, err := json.Marshal(blocks)
	if err != nil {
		return fmt.Errorf("encode assistant message: %w", err)
	}
	return t.write(line{Type: "assistant", Message: assistantMessage{
		ID:      "msg_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		Type:    "message",
		Role:    "assistant",
		Model:   "legion-scripted",
		Content: blocks,
		Usage:   map[string]int{"input_tokens": t.written/4 + 1, "output_tokens": len(out)/4 + 1},
	}})
}

// toolUse writes an assistant tool_use of tool name and returns its ID.
func (t *transcript) toolUse(name string, input any) (string, error) {
	id := "toolu_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	return id, t.assistant(toolUseBlock{Type: "tool_use", ID: id, Name: name, Input: input})
}

func (t *transcript) progress(toolUseID string, data any) error {
	return t.write(line{Type: "progress", Data: data, ToolUseID: toolUseID, ParentToolUseID: toolUseID})
}

func (t *transcript) system(subtype, content string) error {
	return t.write(line{Type: "system", Subtype: subtype, Content: content, Level: "info"})
}
