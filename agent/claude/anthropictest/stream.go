package anthropictest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// The wire types below keep the field order of the real API ("type"
// first), so a stream reads like one the API sends.

type usage struct {
	InputTokens              int    `json:"input_tokens"`
	CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
	OutputTokens             int    `json:"output_tokens"`
	ServiceTier              string `json:"service_tier"`
}

type message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// fixedSignature is the signature of a thinking block that names none.
const fixedSignature = "anthropictest-signature"

// tokens estimates a token count: about four bytes a token.
func tokens(n int) int { return max(1, (n+3)/4) }

// message builds the whole assistant message that answers req with turn;
// tool_use blocks get their ids and inputs (as JSON) here.
func (s *Server) message(req *Request, turn Turn) message {
	stop := turn.StopReason
	m := message{ID: s.newID("msg"), Type: "message", Role: "assistant", Model: req.Model, Content: []any{},
		Usage: usage{InputTokens: tokens(len(req.Body)), ServiceTier: "standard"}}
	out := 0
	for _, b := range turn.Blocks {
		switch b.Type {
		case "text":
			m.Content = append(m.Content, textBlock{Type: "text", Text: b.Text})
			out += len(b.Text)
		case "thinking":
			sig := b.Signature
			if sig == "" {
				sig = fixedSignature
			}
			m.Content = append(m.Content, thinkingBlock{Type: "thinking", Thinking: b.Text, Signature: sig})
			out += len(b.Text)
		case "tool_use":
			id := b.ID
			if id == "" {
				id = s.newID("toolu")
			}
			input := marshal(b.Input)
			if b.Input == nil {
				input = []byte("{}")
			}
			m.Content = append(m.Content, toolUseBlock{Type: "tool_use", ID: id, Name: b.Name, Input: input})
			out += len(input)
			if stop == "" {
				stop = "tool_use"
			}
		default:
			panic(fmt.Sprintf("anthropictest: block type %q: want text, thinking or tool_use", b.Type))
		}
	}
	if stop == "" {
		stop = "end_turn"
	}
	m.StopReason = &stop
	m.Usage.OutputTokens = tokens(out)
	return m
}

// marshal is json.Marshal without HTML escaping, as the API writes JSON.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("anthropictest: marshal %T: %v", v, err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// event is one server-sent event.
type event struct {
	name string
	data any
}

// events is the stream of m: message_start, the blocks, message_delta,
// message_stop.
func events(m message) []event {
	start := m
	start.Content = []any{}
	start.StopReason = nil
	start.Usage.OutputTokens = 1
	evs := []event{{"message_start", struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}{"message_start", start}}}

	type blockEvent struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	type deltaEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	type stopEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	delta := func(i int, d any) event { return event{"content_block_delta", deltaEvent{"content_block_delta", i, d}} }
	for i, c := range m.Content {
		var first any
		var deltas []event
		switch b := c.(type) {
		case textBlock:
			first = textBlock{Type: "text"}
			for _, p := range split(b.Text, max(1, (len(b.Text)+2)/3)) {
				deltas = append(deltas, delta(i, textBlock{Type: "text_delta", Text: p}))
			}
		case thinkingBlock:
			first = thinkingBlock{Type: "thinking"}
			for _, p := range split(b.Thinking, max(1, (len(b.Thinking)+2)/3)) {
				deltas = append(deltas, delta(i, struct {
					Type     string `json:"type"`
					Thinking string `json:"thinking"`
				}{"thinking_delta", p}))
			}
			deltas = append(deltas, delta(i, struct {
				Type      string `json:"type"`
				Signature string `json:"signature"`
			}{"signature_delta", b.Signature}))
		case toolUseBlock:
			first = toolUseBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: json.RawMessage("{}")}
			for _, p := range append([]string{""}, split(string(b.Input), jsonChunk)...) {
				deltas = append(deltas, delta(i, struct {
					Type        string `json:"type"`
					PartialJSON string `json:"partial_json"`
				}{"input_json_delta", p}))
			}
		}
		evs = append(evs, event{"content_block_start", blockEvent{"content_block_start", i, first}})
		if i == 0 {
			evs = append(evs, event{"ping", verbatim(`{"type": "ping"}`)}) // spaced, as the API sends it
		}
		evs = append(evs, deltas...)
		evs = append(evs, event{"content_block_stop", stopEvent{"content_block_stop", i}})
	}
	evs = append(evs, event{"message_delta", struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   *string `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}{Type: "message_delta", Delta: struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}{StopReason: m.StopReason}, Usage: struct {
		OutputTokens int `json:"output_tokens"`
	}{m.Usage.OutputTokens}}})
	evs = append(evs, event{"message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"}})
	return evs
}

// jsonChunk is the size of an input_json_delta piece: small enough that
// every tool input of a test arrives in several pieces.
const jsonChunk = 12

// split cuts s into pieces of about n bytes, never inside a UTF-8
// character. An empty s is one empty piece.
func split(s string, n int) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// verbatim is event data written as it is.
type verbatim string

// writeEvent writes one event in SSE framing and flushes it.
func writeEvent(w http.ResponseWriter, e event) error {
	data, ok := e.data.(verbatim)
	if !ok {
		data = verbatim(marshal(e.data))
	}
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, data); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// stream answers with the events of m, as turn says (stall, error event,
// pacing). It returns when the stream ends, the client goes away, or the
// server closes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, m message, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if http.NewResponseController(w).Flush() != nil {
		return // the client went away
	}
	evs := events(m)
	if turn.StreamError != nil {
		evs = append(evs[:1:1], event{"error", errorEvent{"error", *turn.StreamError}})
	}
	ctx := r.Context()
	for i := 0; i <= len(evs); i++ {
		if st := turn.Stall; st != nil && i == min(st.After, len(evs)) && !s.hold(ctx, st) {
			return
		}
		if i == len(evs) {
			return
		}
		if i > 0 && turn.EventDelay > 0 {
			t := time.NewTimer(turn.EventDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			case <-s.closing:
				t.Stop()
				return
			}
		}
		if writeEvent(w, evs[i]) != nil {
			return // the client went away
		}
	}
}

// hold holds a stream at st until it is released (true), or the client
// goes away or the server closes (false). A Stall that held once does not
// hold again.
func (s *Server) hold(ctx context.Context, st *Stall) bool {
	st.init()
	first := false
	st.stalledOnce.Do(func() { first = true; close(st.stalled) })
	if !first {
		return true
	}
	select {
	case <-st.released:
		return true
	case <-ctx.Done():
		st.goneOnce.Do(func() { close(st.gone) })
		return false
	case <-s.closing:
		return false
	}
}

type errorEvent struct {
	Type  string   `json:"type"`
	Error APIError `json:"error"`
}
