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
	"github.com/legion-dev/legion/ptyworker/claude"
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
	ParentUUID      *string `json:"parentUuid"`
	IsSidechain     bool    `json:"isSidechain"`
	UserType        string  `json:"userType"`
	Cwd             string  `json:"cwd"`
	SessionID       string  `json:"sessionId"`
	Version         string  `json:"version"`
	GitBranch       string  `json:"gitBranch"`
	AgentID         string  `json:"agentId,omitempty"`
	Type            string  `json:"type"`
	Subtype         string  `json:"subtype,omitempty"`
	Content         string  `json:"content,omitempty"`
	Level           string  `json:"level,omitempty"`
	Message         any     `json:"message,omitempty"`
	Data            any     `json:"data,omitempty"`
	ToolUseID       string  `json:"toolUseID,omitempty"`
	ParentToolUseID string  `json:"parentToolUseID,omitempty"`
	ToolUseResult   any     `json:"toolUseResult,omitempty"`
	UUID            string  `json:"uuid"`
	Timestamp       string  `json:"timestamp"`
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
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// transcript appends Claude-format lines to one JSONL file (the session's
// or a subagent's), chaining parentUuid.
type transcript struct {
	f         *os.File
	sessionID string
	cwd       string
	agentID   string // set for subagent files, whose lines are sidechain
	parent    string // uuid of the last line written, "" before the first
}

// openSession opens the session file for id: created for a new session (it
// must not exist, as with Claude Code), appended to for a resumed one (it
// must exist). It also returns the script lines whose once-steps already
// ran in this session.
func openSession(path string, id uuid.UUID, cwd string, resume bool) (*transcript, map[string]bool, error) {
	t := &transcript{sessionID: id.String(), cwd: cwd}
	done := map[string]bool{}
	if !resume {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, nil, fmt.Errorf("create session directory: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return nil, nil, fmt.Errorf("session ID %s is already in use (%s exists); resume it with --resume", id, path)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("create session file: %w", err)
		}
		t.f = f
		return t, done, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("no conversation found with session ID %s (no %s)", id, path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open session file: %w", err)
	}
	// Find the last line's uuid to chain on, and the once-steps done.
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), claude.MaxLineSize)
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

// openSubagent creates a subagent file under the session's subagent
// directory.
func openSubagent(sessionFile string, sessionID, cwd string) (*transcript, error) {
	dir := claude.SubagentDir(sessionFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create subagent directory: %w", err)
	}
	agentID := strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	path := filepath.Join(dir, "agent-"+agentID+".jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create subagent file: %w", err)
	}
	return &transcript{f: f, sessionID: sessionID, cwd: cwd, agentID: agentID}, nil
}

func (t *transcript) Close() error { return t.f.Close() }

// write appends l after filling in the common fields; each line is one
// write(2), so a reader never sees two lines interleaved.
func (t *transcript) write(l line) error {
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
	return nil
}

func (t *transcript) user(content any) error {
	return t.write(line{Type: "user", Message: userMessage{Role: "user", Content: content}})
}

func (t *transcript) toolResult(toolUseID, content string, result any) error {
	return t.write(line{
		Type:          "user",
		Message:       userMessage{Role: "user", Content: []any{toolResultBlock{ToolUseID: toolUseID, Type: "tool_result", Content: content}}},
		ToolUseResult: result,
	})
}

func (t *transcript) assistant(blocks ...any) error {
	return t.write(line{Type: "assistant", Message: assistantMessage{
		ID:      "msg_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		Type:    "message",
		Role:    "assistant",
		Model:   "legion-scripted",
		Content: blocks,
		Usage:   map[string]int{"input_tokens": 0, "output_tokens": 0},
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
