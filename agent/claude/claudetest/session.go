package claudetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Line is one line of a session file: the fields tests look at, and the
// line itself.
type Line struct {
	Type    string `json:"type"` // "user", "assistant", "system", and many bookkeeping types
	UUID    string `json:"uuid"`
	Message struct {
		Role    string          `json:"role"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"` // a string or an array of blocks
	} `json:"message"`
	// ToolUseResult is the CLI's own record of a tool's result (for an
	// answered AskUserQuestion: {"questions","answers","annotations"}).
	ToolUseResult json.RawMessage `json:"toolUseResult"`
	Raw           json.RawMessage `json:"-"`
}

// Block is a content block of a message.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`   // of a tool_use
	Name      string          `json:"name"` // of a tool_use
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"` // of a tool_result
	Content   json.RawMessage `json:"content"`     // of a tool_result: a string or blocks
	IsError   bool            `json:"is_error"`
}

// Blocks returns the line's content blocks; a string content is one text
// block.
func (l Line) Blocks() []Block { return blocksOf(l.Message.Content) }

// Text returns the text blocks of the line joined by newlines.
func (l Line) Text() string { return textOf(l.Message.Content) }

// ResultText is a tool_result's content as text: the string, or its text
// blocks joined by newlines.
func (b Block) ResultText() string { return textOf(b.Content) }

// blocksOf decodes content, a string (one text block) or an array of
// blocks.
func blocksOf(content json.RawMessage) []Block {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []Block{{Type: "text", Text: s}}
	}
	var blocks []Block
	if json.Unmarshal(content, &blocks) != nil {
		return nil
	}
	return blocks
}

// textOf returns the text blocks of content joined by newlines.
func textOf(content json.RawMessage) string {
	var texts []string
	for _, b := range blocksOf(content) {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Session is a session file's lines, in order.
type Session []Line

// ReadSession reads the session file at path. Lines that are not JSON
// objects (a half-written last line) are skipped.
func ReadSession(path string) (Session, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read session file: %w", err)
	}
	var s Session
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l Line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		l.Raw = append(json.RawMessage(nil), sc.Bytes()...)
		s = append(s, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read session file %s: %w", path, err)
	}
	return s, nil
}

// ToolResult returns the tool_result block for tool_use id and the user
// line holding it, or false.
func (s Session) ToolResult(id string) (Block, Line, bool) {
	for _, l := range s {
		if l.Type != "user" {
			continue
		}
		for _, b := range l.Blocks() {
			if b.Type == "tool_result" && b.ToolUseID == id {
				return b, l, true
			}
		}
	}
	return Block{}, Line{}, false
}

// ToolUses returns the tool_use blocks of the assistant lines, in order.
func (s Session) ToolUses() []Block {
	var out []Block
	for _, l := range s {
		if l.Type != "assistant" {
			continue
		}
		for _, b := range l.Blocks() {
			if b.Type == "tool_use" {
				out = append(out, b)
			}
		}
	}
	return out
}

// Prompts returns the text of the user lines that are prompts (not tool
// results), in order.
func (s Session) Prompts() []string {
	var out []string
	for _, l := range s {
		if l.Type == "user" && !hasToolResult(l) {
			if text := l.Text(); text != "" {
				out = append(out, text)
			}
		}
	}
	return out
}

// AssistantTexts returns the text of the assistant lines, in order.
func (s Session) AssistantTexts() []string {
	var out []string
	for _, l := range s {
		if l.Type == "assistant" {
			if text := l.Text(); text != "" {
				out = append(out, text)
			}
		}
	}
	return out
}

func hasToolResult(l Line) bool {
	for _, b := range l.Blocks() {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// Answers returns what toolUseResult of an answered AskUserQuestion maps
// each question to.
func (l Line) Answers() map[string]string {
	var r struct {
		Answers map[string]string `json:"answers"`
	}
	json.Unmarshal(l.ToolUseResult, &r)
	return r.Answers
}

// PermissionSource is who decided the permission of the tool whose
// result the line holds, as the CLI records it (permissionDecision.source:
// "hook" for a PermissionRequest hook's decision); "" when the line
// records none (a tool an allow rule let run, say).
func (l Line) PermissionSource() string {
	var r struct {
		PermissionDecision struct {
			Source string `json:"source"`
		} `json:"permissionDecision"`
	}
	if json.Unmarshal(l.Raw, &r) != nil {
		return ""
	}
	return r.PermissionDecision.Source
}
