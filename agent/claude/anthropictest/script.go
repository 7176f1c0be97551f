package anthropictest

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Block is one content block of an assistant message.
type Block struct {
	Type      string // "text", "thinking" or "tool_use"
	Text      string // the text of a text block, the thinking of a thinking block
	Signature string // a thinking block's signature ("" for a fixed one)
	ID        string // a tool_use block's id ("" for a generated toolu_…)
	Name      string // a tool_use block's tool name
	Input     any    // a tool_use block's input, marshalled to a JSON object
}

// Text is a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// Thinking is a thinking block.
func Thinking(s string) Block { return Block{Type: "thinking", Text: s} }

// ToolUse is a tool_use block calling tool name with input (a value that
// marshals to a JSON object).
func ToolUse(name string, input any) Block {
	return Block{Type: "tool_use", Name: name, Input: input}
}

// WithID returns b with tool_use id id, so a test can find its tool_result
// in a later request (Request.ToolResult).
func (b Block) WithID(id string) Block { b.ID = id; return b }

// Bash calls Claude Code's Bash tool.
func Bash(command, description string) Block {
	return ToolUse("Bash", map[string]any{"command": command, "description": description})
}

// Write calls Claude Code's Write tool (its schema names the fields
// file_path and content; the request's Tools hold the schema the CLI sent).
func Write(path, content string) Block {
	return ToolUse("Write", map[string]any{"file_path": path, "content": content})
}

// Option is a choice of a Question.
type Option struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// Question is one question of an AskUserQuestion call, as Claude Code's
// tool takes it (agent/claude/FACTS.md).
type Question struct {
	Question    string   `json:"question"`
	Header      string   `json:"header"`
	Options     []Option `json:"options"`
	MultiSelect bool     `json:"multiSelect"`
}

// AskUserQuestion calls Claude Code's AskUserQuestion tool.
func AskUserQuestion(questions ...Question) Block {
	return ToolUse("AskUserQuestion", map[string]any{"questions": questions})
}

// Agent calls Claude Code's Agent tool (input as a real model's call of it
// looks: description, prompt, subagent_type). Claude Code runs the subagent in
// the background, with requests of its own: script its turns with a Match
// on its prompt (Request.FirstUserText) or on its tools (a subagent is
// offered no AskUserQuestion).
func Agent(description, prompt, subagentType string) Block {
	return ToolUse("Agent", map[string]any{
		"description": description, "prompt": prompt, "subagent_type": subagentType,
	})
}

// Forever is a Turn.Repeat that never runs out.
const Forever = -1

// Turn is the server's answer to one request.
type Turn struct {
	// Match, if set, says whether this turn answers r; a turn that does not
	// match stays queued for a later request. nil matches every request.
	// It runs under the server's lock: it must not call the Server.
	Match func(r *Request) bool

	Blocks []Block
	// StopReason is the message's stop_reason; "" means "tool_use" when a
	// block is a tool_use, else "end_turn".
	StopReason string

	// Failure, if set, answers with an HTTP error instead of a message.
	Failure *Failure
	// StreamError, if set, ends the stream after message_start with an
	// error event of this type and message (e.g. overloaded_error).
	StreamError *APIError
	// Stall, if set, holds the stream after some events (see Stall).
	Stall *Stall
	// EventDelay is a pause before each event after message_start: a slow
	// stream.
	EventDelay time.Duration

	// Follow, with the follow mode on, makes the follow model's answer to
	// the request this turn's content (Blocks and StopReason are not
	// used), delivered as the turn says: a Stall or EventDelay holds the
	// model's own message mid-stream. A test disrupts a followed
	// conversation so without scripting what the model says. With the
	// follow mode off the turn is answered as it is.
	Follow bool

	// Repeat is how many more requests this turn answers after the first
	// (Forever: every matching request from then on).
	Repeat int
}

// APIError is the error object of an error body or an error event.
type APIError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Failure is an HTTP error response.
type Failure struct {
	Status int
	Error  APIError
	Header http.Header // extra response headers (retry-after, …)
}

// RateLimited is a 429 rate_limit_error with retry-after (whole seconds,
// at least 1) and the anthropic-ratelimit-requests-* headers, the requests
// limit reset at reset.
func RateLimited(retryAfter time.Duration, reset time.Time) *Failure {
	h := http.Header{}
	h.Set("retry-after", strconv.Itoa(max(1, int(retryAfter.Round(time.Second)/time.Second))))
	h.Set("anthropic-ratelimit-requests-limit", "50")
	h.Set("anthropic-ratelimit-requests-remaining", "0")
	h.Set("anthropic-ratelimit-requests-reset", reset.UTC().Format(time.RFC3339))
	return &Failure{
		Status: http.StatusTooManyRequests,
		Error:  APIError{Type: "rate_limit_error", Message: "This request would exceed the rate limit for your organization of 50 requests per minute."},
		Header: h,
	}
}

// UsageLimited is a 429 rate_limit_error as a Claude subscription's usage
// limit sends it: the anthropic-ratelimit-unified-* headers that Claude
// Code reads (status "rejected", reset in Unix seconds, the representative
// claim: "five_hour", "seven_day", …), and retry-after until reset.
func UsageLimited(claim string, reset time.Time) *Failure {
	h := http.Header{}
	h.Set("retry-after", strconv.Itoa(max(1, int(time.Until(reset).Round(time.Second)/time.Second))))
	h.Set("anthropic-ratelimit-unified-status", "rejected")
	h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("anthropic-ratelimit-unified-representative-claim", claim)
	return &Failure{
		Status: http.StatusTooManyRequests,
		Error:  APIError{Type: "rate_limit_error", Message: "Usage limit reached."},
		Header: h,
	}
}

// Unauthorized is a 401 authentication_error.
func Unauthorized() *Failure {
	return &Failure{Status: http.StatusUnauthorized, Error: APIError{Type: "authentication_error", Message: "invalid x-api-key"}}
}

// Overloaded is a 529 overloaded_error.
func Overloaded() *Failure {
	return &Failure{Status: 529, Error: APIError{Type: "overloaded_error", Message: "Overloaded"}}
}

// Stall holds a stream: After events are written (message_start counts as
// the first, pings count; an After past the last event holds after
// message_stop, before the response ends), then the stream waits until
// Release, the client goes away, or the server closes. After Release the
// rest of the message follows. A Stall holds once: a repeated turn does not
// hold again after its first stream held.
type Stall struct {
	After int

	once                               sync.Once
	stalled, released, gone            chan struct{}
	releaseOnce, stalledOnce, goneOnce sync.Once
}

// NewStall is a Stall after n events.
func NewStall(n int) *Stall {
	return &Stall{After: n}
}

func (st *Stall) init() {
	st.once.Do(func() {
		st.stalled = make(chan struct{})
		st.released = make(chan struct{})
		st.gone = make(chan struct{})
	})
}

// Stalled is closed once the stream holds.
func (st *Stall) Stalled() <-chan struct{} { st.init(); return st.stalled }

// Gone is closed when the client went away while the stream held.
func (st *Stall) Gone() <-chan struct{} { st.init(); return st.gone }

// Release lets the stream go on. It may be called more than once, and
// before the stream holds (then it never holds).
func (st *Stall) Release() {
	st.init()
	st.releaseOnce.Do(func() { close(st.released) })
}
