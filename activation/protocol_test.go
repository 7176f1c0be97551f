package activation

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		want     Request
		wantCode string // "" for success
		wantText string // substring of the error message
	}{
		{name: "list", line: `{"v":1,"id":"7","cmd":"sessions.list"}` + "\n",
			want: Request{V: 1, ID: "7", Cmd: "sessions.list"}},
		{name: "args", line: `{"v":1,"id":"a","cmd":"send","args":{"name":"x","text":"hi"}}`,
			want: Request{V: 1, ID: "a", Cmd: "send", Args: json.RawMessage(`{"name":"x","text":"hi"}`)}},
		{name: "null args", line: `{"v":1,"cmd":"sessions.list","args":null}`,
			want: Request{V: 1, Cmd: "sessions.list", Args: json.RawMessage(`null`)}},
		{name: "unknown fields ignored", line: `{"v":1,"cmd":"x","future":true}`,
			want: Request{V: 1, Cmd: "x"}},
		{name: "crlf", line: "{\"v\":1,\"cmd\":\"x\"}\r\n", want: Request{V: 1, Cmd: "x"}},
		{name: "empty", line: "\n", wantCode: CodeBadRequest, wantText: "empty request"},
		{name: "not json", line: "hello\n", wantCode: CodeBadRequest, wantText: "malformed request"},
		{name: "truncated", line: `{"v":1,"id":"9","cmd":"x"`, wantCode: CodeBadRequest, wantText: "malformed"},
		{name: "array", line: `[1,2]`, wantCode: CodeBadRequest, wantText: "malformed"},
		{name: "trailing", line: `{"v":1,"cmd":"x"} {}`, wantCode: CodeBadRequest, wantText: "trailing data"},
		{name: "wrong type", line: `{"v":"1","cmd":"x"}`, wantCode: CodeBadRequest, wantText: `field "v"`},
		{name: "no version", line: `{"cmd":"x"}`, wantCode: CodeUnsupportedVersion, wantText: "version 0"},
		{name: "version 2", line: `{"v":2,"cmd":"x"}`, wantCode: CodeUnsupportedVersion, wantText: `"v":1`},
		{name: "no cmd", line: `{"v":1,"id":"3"}`, wantCode: CodeBadRequest, wantText: `no "cmd"`},
		{name: "args not object", line: `{"v":1,"cmd":"x","args":[1]}`, wantCode: CodeBadRequest, wantText: "args must be a JSON object"},
		{name: "long id", line: `{"v":1,"cmd":"x","id":"` + strings.Repeat("i", 65) + `"}`, wantCode: CodeBadRequest, wantText: "request id"},
		{name: "bad utf8", line: "{\"v\":1,\"cmd\":\"\xff\"}", wantCode: CodeBadRequest, wantText: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeRequest([]byte(tt.line))
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("DecodeRequest(%q) error = %v; want nil", tt.line, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("DecodeRequest(%q) mismatch (-want +got):\n%s", tt.line, diff)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantText) {
				t.Errorf("DecodeRequest(%q) error = %v; want code %s containing %q", tt.line, err, tt.wantCode, tt.wantText)
			}
		})
	}
}

func TestDecodeRequestKeepsID(t *testing.T) {
	got, err := DecodeRequest([]byte(`{"v":1,"id":"42","cmd":7}`))
	if err == nil || got.ID != "42" {
		t.Errorf("DecodeRequest(bad cmd type) = %+v, %v; want ID 42 and an error", got, err)
	}
}

func TestDecodeArgs(t *testing.T) {
	var a SpawnArgs
	req := Request{V: 1, Cmd: CmdSpawn, Args: json.RawMessage(`{"name":"x","argv":["/bin/true"],"cwd":"/","stale_after":"90s","extra":1}`)}
	if err := DecodeArgs(req, &a); err != nil {
		t.Fatalf("DecodeArgs(%s) = %v; want nil", req.Args, err)
	}
	want := SpawnArgs{Name: "x", Argv: []string{"/bin/true"}, Cwd: "/", StaleAfter: Duration(90e9)}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("DecodeArgs mismatch (-want +got):\n%s", diff)
	}
	req.Args = json.RawMessage(`{"stale_after":"soon"}`)
	if err := DecodeArgs(req, &a); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "soon") {
		t.Errorf("DecodeArgs(bad duration) = %v; want bad_request naming the value", err)
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string // "" means valid
	}{
		{"docs", ""},
		{"DEMO-12_plan.v2", ""},
		{"ünïcode", ""},
		{"", "empty"},
		{"a/b", "'/'"},
		{"..", "'..'"},
		{"a..b", "'..'"},
		{".", "'.'"},
		{"-x", "starts with '-'"},
		{"a b", "space"},
		{"a\tb", "control"},
		{"a\x1bb", "control"},
		{"a\u0085b", "control"},
		{strings.Repeat("x", 101), "at most 100"},
		{"\xff", "UTF-8"},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ValidateName(%q) = %v; want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ValidateName(%q) = %v; want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := error(apiErr(CodeRecovering, "wait"))
	if !errors.Is(err, ErrRecovering) || errors.Is(err, ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrRecovering/ErrNotFound) = %v/%v; want true/false", err, errors.Is(err, ErrRecovering), errors.Is(err, ErrNotFound))
	}
	if e := apiErr(CodeRecovering, "x"); !e.Retryable {
		t.Errorf("apiErr(recovering).Retryable = false; want true")
	}
	if e := apiErr(CodeNotFound, "x"); e.Retryable {
		t.Errorf("apiErr(not_found).Retryable = true; want false")
	}
}

// FuzzDecodeRequest feeds arbitrary lines to the decoder: it must never
// panic, must return an *Error with a known code on failure, and a decoded
// request must survive a round trip.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"id":"1","cmd":"sessions.list"}`,
		`{"v":1,"id":"2","cmd":"send","args":{"name":"a","text":"b"}}`,
		`{"v":1,"cmd":"spawn","args":{"argv":["/bin/sh"],"cwd":"/","stale_after":"1s"}}`,
		`{"v":2}`, `[]`, `{}`, `{"v":1,"cmd":"x","args":null}`, "\xff", `{"v":1,"cmd":"x"} x`,
	} {
		f.Add([]byte(s))
	}
	codes := map[string]bool{CodeBadRequest: true, CodeUnsupportedVersion: true}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := DecodeRequest(line)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !codes[e.Code] || e.Message == "" {
				t.Fatalf("DecodeRequest(%q) error = %#v; want *Error with a known code and a message", line, err)
			}
			if len(req.ID) > maxIDLen {
				t.Fatalf("DecodeRequest(%q) returned id of %d bytes", line, len(req.ID))
			}
			return
		}
		if req.V != ProtocolVersion || req.Cmd == "" {
			t.Fatalf("DecodeRequest(%q) = %+v; want v=1 and a cmd", line, req)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", req, err)
		}
		again, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("DecodeRequest(re-encoded %s) = %v", b, err)
		}
		if again.ID != req.ID || again.Cmd != req.Cmd {
			t.Fatalf("round trip changed the request: %+v, then %+v", req, again)
		}
		var a SendArgs
		_ = DecodeArgs(req, &a) // must not panic; errors are fine
	})
}
