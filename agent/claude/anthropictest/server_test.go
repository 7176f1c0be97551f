package anthropictest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
)

// wait is the generous deadline of a wait on a condition.
const wait = 30 * time.Second

// requestBody is a messages request the way Claude Code sends one, cut
// down.
const requestBody = `{"model":"claude-opus-5-5","max_tokens":128000,"stream":true,` +
	`"system":[{"type":"text","text":"You are Claude Code."}],` +
	`"messages":[{"role":"user","content":"say hello"}],` +
	`"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"name":"AskUserQuestion","input_schema":{"type":"object"}}],` +
	`"metadata":{"user_id":"u1"}}`

// post sends body to the server's /v1/messages?beta=true as session.
func post(t *testing.T, ctx context.Context, s *anthropictest.Server, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/messages?beta=true", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "sk-test")
	req.Header.Set("anthropic-version", "2023-06-01")
	if session != "" {
		req.Header.Set(anthropictest.SessionHeader, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/messages: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sse is one event as read off the wire.
type sse struct {
	Name string
	Data map[string]any
}

// readEvent reads one event and checks its framing: "event: NAME",
// "data: JSON" whose type is NAME, a blank line.
func readEvent(br *bufio.Reader) (sse, error) {
	var lines [3]string
	for i := range lines {
		l, err := br.ReadString('\n')
		if err != nil {
			return sse{}, err
		}
		lines[i] = l
	}
	name, ok := strings.CutPrefix(lines[0], "event: ")
	data, ok2 := strings.CutPrefix(lines[1], "data: ")
	if !ok || !ok2 || lines[2] != "\n" {
		return sse{}, fmt.Errorf("bad SSE framing: %q", lines)
	}
	e := sse{Name: strings.TrimSuffix(name, "\n")}
	if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
		return sse{}, fmt.Errorf("event %s: data is not JSON: %v", e.Name, err)
	}
	if e.Data["type"] != e.Name {
		return sse{}, fmt.Errorf("event %s has data of type %v", e.Name, e.Data["type"])
	}
	return e, nil
}

// readAll reads events to the end of the stream.
func readAll(t *testing.T, br *bufio.Reader) []sse {
	t.Helper()
	var evs []sse
	for {
		e, err := readEvent(br)
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("after %d events: %v", len(evs), err)
		}
		evs = append(evs, e)
	}
}

// closed waits for ch to be closed, with a generous deadline.
func closed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("gave up after %v waiting for %s", wait, what)
	}
}

func names(evs []sse) []string {
	var out []string
	for _, e := range evs {
		name := e.Name
		if d, ok := e.Data["delta"].(map[string]any); ok && e.Name == "content_block_delta" {
			name += "/" + d["type"].(string)
		}
		out = append(out, name)
	}
	return out
}

func TestStreamIsByteExact(t *testing.T) {
	s := anthropictest.NewServer(t)
	s.Script("s1", anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Hello <there>!")}})
	resp := post(t, t.Context(), s, "s1", requestBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d; want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("Content-Type %q; want text/event-stream; charset=utf-8", ct)
	}
	if id := resp.Header.Get("request-id"); id != "req_test000001" {
		t.Errorf("request-id %q; want req_test000001", id)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	in := (len(requestBody) + 3) / 4
	want := `event: message_start
data: {"type":"message_start","message":{"id":"msg_test000002","type":"message","role":"assistant","model":"claude-opus-5-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":` + fmt.Sprint(in) + `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" <the"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"re>!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}

event: message_stop
data: {"type":"message_stop"}

`
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
}

func TestToolUseInputArrivesInPieces(t *testing.T) {
	s := anthropictest.NewServer(t)
	command := `legion issue comment CC-1 "naïve café — ✓ done"`
	s.Script("s1", anthropictest.Turn{Blocks: []anthropictest.Block{
		anthropictest.Thinking("The issue is done; say so."),
		anthropictest.Text("Commenting."),
		anthropictest.Bash(command, "Comment on the issue").WithID("toolu_bash"),
	}})
	resp := post(t, t.Context(), s, "s1", requestBody)
	evs := readAll(t, bufio.NewReader(resp.Body))

	var pieces []string
	var thinking, signature string
	for _, e := range evs {
		if e.Name == "content_block_start" && e.Data["index"] == 2.0 {
			want := map[string]any{"type": "tool_use", "id": "toolu_bash", "name": "Bash", "input": map[string]any{}}
			if diff := cmp.Diff(want, e.Data["content_block"]); diff != "" {
				t.Errorf("tool_use content_block_start (-want +got):\n%s", diff)
			}
		}
		if e.Name != "content_block_delta" {
			continue
		}
		d := e.Data["delta"].(map[string]any)
		switch d["type"] {
		case "input_json_delta":
			pieces = append(pieces, d["partial_json"].(string))
		case "thinking_delta":
			thinking += d["thinking"].(string)
		case "signature_delta":
			signature = d["signature"].(string)
		}
	}
	if len(pieces) < 4 || pieces[0] != "" {
		t.Errorf("input_json_delta pieces %q; want several, the first empty", pieces)
	}
	var input map[string]string
	if err := json.Unmarshal([]byte(strings.Join(pieces, "")), &input); err != nil {
		t.Fatalf("joined partial_json %q: %v", strings.Join(pieces, ""), err)
	}
	if input["command"] != command {
		t.Errorf("command %q; want %q", input["command"], command)
	}
	if thinking != "The issue is done; say so." || signature == "" {
		t.Errorf("thinking %q, signature %q; want the thinking and a signature", thinking, signature)
	}

	want := []string{
		"message_start",
		"content_block_start", "ping", "content_block_delta/thinking_delta", "content_block_delta/thinking_delta", "content_block_delta/thinking_delta", "content_block_delta/signature_delta", "content_block_stop",
		"content_block_start", "content_block_delta/text_delta", "content_block_delta/text_delta", "content_block_delta/text_delta", "content_block_stop",
		"content_block_start",
	}
	for range pieces {
		want = append(want, "content_block_delta/input_json_delta")
	}
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	if diff := cmp.Diff(want, names(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	last := evs[len(evs)-2].Data["delta"].(map[string]any)
	if last["stop_reason"] != "tool_use" {
		t.Errorf("stop_reason %v; want tool_use", last["stop_reason"])
	}
}

func TestStallHoldsUntilReleased(t *testing.T) {
	s := anthropictest.NewServer(t)
	stall := anthropictest.NewStall(4)
	s.Script("s1", anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("a long answer")}, Stall: stall})
	resp := post(t, t.Context(), s, "s1", requestBody)
	br := bufio.NewReader(resp.Body)
	var got []sse
	for range 4 {
		e, err := readEvent(br)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	closed(t, stall.Stalled(), "the stream to stall after 4 events")
	stall.Release()
	got = append(got, readAll(t, br)...)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta/text_delta",
		"content_block_delta/text_delta", "content_block_delta/text_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(want, names(got)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStallBeforeFirstEvent(t *testing.T) {
	s := anthropictest.NewServer(t)
	stall := anthropictest.NewStall(0)
	s.Script("s1", anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("late")}, Stall: stall})
	resp := post(t, t.Context(), s, "s1", requestBody) // returns with the headers
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d; want 200", resp.StatusCode)
	}
	closed(t, stall.Stalled(), "the stream to stall before message_start")
	stall.Release()
	if evs := readAll(t, bufio.NewReader(resp.Body)); len(evs) == 0 || evs[0].Name != "message_start" {
		t.Errorf("events %v; want the whole message", names(evs))
	}
}

func TestStallEndsWhenClientGoes(t *testing.T) {
	s := anthropictest.NewServer(t)
	stall := anthropictest.NewStall(2)
	s.Script("s1", anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("never finished")}, Stall: stall})
	ctx, cancel := context.WithCancel(t.Context())
	resp := post(t, ctx, s, "s1", requestBody)
	br := bufio.NewReader(resp.Body)
	for range 2 {
		if _, err := readEvent(br); err != nil {
			t.Fatal(err)
		}
	}
	closed(t, stall.Stalled(), "the stream to stall after 2 events")
	cancel()
	closed(t, stall.Gone(), "the held stream to notice the client went away")

	// A stall nobody releases ends with the server when the test ends.
	s.Script("s2", anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("held")}, Stall: anthropictest.NewStall(1)})
	if _, err := readEvent(bufio.NewReader(post(t, t.Context(), s, "s2", requestBody).Body)); err != nil {
		t.Fatal(err)
	}
}

func TestErrorResponses(t *testing.T) {
	reset := time.Date(2026, 11, 24, 11, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		failure    *anthropictest.Failure
		status     int
		body       string
		wantHeader map[string]string
	}{
		{"rate limited", anthropictest.RateLimited(30*time.Second, reset), 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."},"request_id":"req_test000001"}`,
			map[string]string{"retry-after": "30", "anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2026-11-24T11:00:00Z"}},
		{"usage limited", anthropictest.UsageLimited("five_hour", reset), 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Usage limit reached."},"request_id":"req_test000001"}`,
			map[string]string{"anthropic-ratelimit-unified-status": "rejected", "anthropic-ratelimit-unified-reset": "1795518000", "anthropic-ratelimit-unified-representative-claim": "five_hour"}},
		{"unauthorized", anthropictest.Unauthorized(), 401,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_test000001"}`, nil},
		{"overloaded", anthropictest.Overloaded(), 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_test000001"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := anthropictest.NewServer(t)
			s.Script("s1", anthropictest.Turn{Failure: tt.failure, Repeat: 1}, anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("ok")}})
			for i := range 2 {
				resp := post(t, t.Context(), s, "s1", requestBody)
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tt.status {
					t.Fatalf("request %d: status %d; want %d", i, resp.StatusCode, tt.status)
				}
				if i > 0 {
					continue // same failure, next request id
				}
				if got := strings.TrimSpace(string(body)); got != tt.body {
					t.Errorf("body %s; want %s", got, tt.body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q; want application/json", ct)
				}
				for k, v := range tt.wantHeader {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("header %s = %q; want %q", k, got, v)
					}
				}
			}
			if resp := post(t, t.Context(), s, "s1", requestBody); resp.StatusCode != http.StatusOK {
				t.Errorf("after the repeated failure: status %d; want 200", resp.StatusCode)
			}
		})
	}
}

func TestWrongKeyAndUnknownPath(t *testing.T) {
	s := anthropictest.NewServer(t)
	s.Key = "sk-other"
	resp := post(t, t.Context(), s, "s1", requestBody)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: status %d; want 401", resp.StatusCode)
	}
	for _, c := range []struct{ method, path string }{{"POST", "/v1/messages/count_tokens"}, {"GET", "/v1/models"}} {
		req, _ := http.NewRequest(c.method, s.URL+c.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Type  string
			Error anthropictest.APIError
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || body.Type != "error" || body.Error.Type != "not_found_error" {
			t.Errorf("%s %s: status %d, body %+v; want 404 not_found_error", c.method, c.path, resp.StatusCode, body)
		}
	}
	resp, err := http.Head(s.URL + "/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /api/hello: status %d; want 200", resp.StatusCode)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	s := anthropictest.NewServer(t)
	s.Script("s1", anthropictest.Turn{StreamError: &anthropictest.APIError{Type: "overloaded_error", Message: "Overloaded"}})
	evs := readAll(t, bufio.NewReader(post(t, t.Context(), s, "s1", requestBody).Body))
	if diff := cmp.Diff([]string{"message_start", "error"}, names(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	want := map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}}
	if diff := cmp.Diff(want, evs[1].Data); diff != "" {
		t.Errorf("error event (-want +got):\n%s", diff)
	}
}

// text returns the text of a whole (non-streaming) message response.
func text(t *testing.T, resp *http.Response) string {
	t.Helper()
	var m struct {
		Type    string
		Content []struct{ Type, Text string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || len(m.Content) != 1 {
		t.Fatalf("response %+v; want a message with one block", m)
	}
	return m.Content[0].Text
}

func TestScriptsPerSessionAndRecording(t *testing.T) {
	s := anthropictest.NewServer(t)
	reply := func(s string) anthropictest.Turn {
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(s)}}
	}
	s.Script("a", reply("a1"), reply("a2"))
	s.Script("b", reply("b1"))
	// The subagent's requests offer no AskUserQuestion; its turn waits for one.
	s.Script("b", anthropictest.Turn{
		Match: func(r *anthropictest.Request) bool {
			return !strings.Contains(strings.Join(r.ToolNames(), ","), "AskUserQuestion")
		},
		Blocks: []anthropictest.Block{anthropictest.Text("subagent")},
	}, reply("b2"))
	s.Script(anthropictest.AnySession, reply("any"))

	nonStream := strings.Replace(requestBody, `"stream":true`, `"stream":false`, 1)
	subagent := strings.Replace(nonStream, `,{"name":"AskUserQuestion","input_schema":{"type":"object"}}`, "", 1)
	withResult := strings.Replace(nonStream, `"content":"say hello"}`, `"content":"say hello"},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_q","name":"AskUserQuestion","input":{}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"Your questions have been answered: \"Q\"=\"B\""},{"type":"text","text":"go on"}]}`, 1)
	steps := []struct{ session, body, want string }{
		{"b", nonStream, "b1"},
		{"a", nonStream, "a1"},
		{"b", nonStream, "b2"},
		{"b", subagent, "subagent"},
		{"a", withResult, "a2"},
		{"c", nonStream, "any"},
		{"a", nonStream, `anthropictest: no scripted turn left for session "a"`},
	}
	for i, st := range steps {
		if got := text(t, post(t, t.Context(), s, st.session, st.body)); got != st.want {
			t.Errorf("step %d (session %s): reply %q; want %q", i, st.session, got, st.want)
		}
	}

	// Not a messages request: recorded, not among MessageRequests.
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/messages/count_tokens", strings.NewReader(nonStream))
	req.Header.Set(anthropictest.SessionHeader, "a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := len(s.Requests()); n != len(steps)+1 {
		t.Errorf("recorded %d requests in all; want %d", n, len(steps)+1)
	}

	all := s.MessageRequests("")
	if len(all) != len(steps) {
		t.Fatalf("recorded %d requests; want %d", len(all), len(steps))
	}
	for i, r := range all {
		if r.Unscripted != (i == len(steps)-1) {
			t.Errorf("request %d: Unscripted %v", i, r.Unscripted)
		}
	}
	a := s.MessageRequests("a")
	if len(a) != 3 {
		t.Fatalf("session a: %d requests; want 3", len(a))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Time.Before(all[i-1].Time) || all[i].Time.IsZero() {
			t.Errorf("request %d: Time %v, before request %d's %v", i, all[i].Time, i-1, all[i-1].Time)
		}
	}
	r := a[1]
	if r.Model != "claude-opus-5-5" || r.MaxTokens != 128000 || r.Stream || r.Path != "/v1/messages?beta=true" ||
		r.Header.Get("anthropic-version") != "2023-06-01" || r.Header.Get("x-api-key") != "sk-test" {
		t.Errorf("recorded request %+v", r)
	}
	if diff := cmp.Diff([]string{"Bash", "AskUserQuestion"}, r.ToolNames()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if got := r.LastUserText(); got != "go on" {
		t.Errorf("last user text %q; want %q", got, "go on")
	}
	res, ok := r.ToolResult("toolu_q")
	if !ok || res.Content != `Your questions have been answered: "Q"="B"` || res.IsError {
		t.Errorf("tool result %+v, %v; want the answer", res, ok)
	}
	if got := r.FirstUserText(); got != "say hello" {
		t.Errorf("first user text %q; want %q", got, "say hello")
	}
	if got := a[0].LastUserText(); got != "say hello" {
		t.Errorf("first user text %q; want %q", got, "say hello")
	}
	for _, session := range []string{"a", "b", anthropictest.AnySession} {
		if n := s.Pending(session); n != 0 {
			t.Errorf("session %s: %d turns left; want 0", session, n)
		}
	}
}
