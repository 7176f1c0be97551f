package activation

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation/api"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		want     api.Request
		wantCode string // "" for success
		wantText string // substring of the error message
	}{
		{name: "list", line: `{"v":1,"id":"7","cmd":"sessions.list"}` + "\n",
			want: api.Request{V: 1, ID: "7", Cmd: "sessions.list"}},
		{name: "args", line: `{"v":1,"id":"a","cmd":"send","args":{"name":"x","text":"hi"}}`,
			want: api.Request{V: 1, ID: "a", Cmd: "send", Args: json.RawMessage(`{"name":"x","text":"hi"}`)}},
		{name: "null args", line: `{"v":1,"cmd":"sessions.list","args":null}`,
			want: api.Request{V: 1, Cmd: "sessions.list", Args: json.RawMessage(`null`)}},
		{name: "unknown fields ignored", line: `{"v":1,"cmd":"x","future":true}`,
			want: api.Request{V: 1, Cmd: "x"}},
		{name: "crlf", line: "{\"v\":1,\"cmd\":\"x\"}\r\n", want: api.Request{V: 1, Cmd: "x"}},
		{name: "empty", line: "\n", wantCode: api.CodeBadRequest, wantText: "empty request"},
		{name: "not json", line: "hello\n", wantCode: api.CodeBadRequest, wantText: "malformed request"},
		{name: "truncated", line: `{"v":1,"id":"9","cmd":"x"`, wantCode: api.CodeBadRequest, wantText: "malformed"},
		{name: "array", line: `[1,2]`, wantCode: api.CodeBadRequest, wantText: "malformed"},
		{name: "trailing", line: `{"v":1,"cmd":"x"} {}`, wantCode: api.CodeBadRequest, wantText: "trailing data"},
		{name: "wrong type", line: `{"v":"1","cmd":"x"}`, wantCode: api.CodeBadRequest, wantText: `field "v"`},
		{name: "no version", line: `{"cmd":"x"}`, wantCode: api.CodeUnsupportedVersion, wantText: "version 0"},
		{name: "version 2", line: `{"v":2,"cmd":"x"}`, wantCode: api.CodeUnsupportedVersion, wantText: `"v":1`},
		{name: "no cmd", line: `{"v":1,"id":"3"}`, wantCode: api.CodeBadRequest, wantText: `no "cmd"`},
		{name: "args not object", line: `{"v":1,"cmd":"x","args":[1]}`, wantCode: api.CodeBadRequest, wantText: "args must be a JSON object"},
		{name: "long id", line: `{"v":1,"cmd":"x","id":"` + strings.Repeat("i", 65) + `"}`, wantCode: api.CodeBadRequest, wantText: "request id"},
		{name: "bad utf8", line: "{\"v\":1,\"cmd\":\"\xff\"}", wantCode: api.CodeBadRequest, wantText: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeRequest([]byte(tt.line))
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("decodeRequest(%q) error = %v; want nil", tt.line, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("decodeRequest(%q) mismatch (-want +got):\n%s", tt.line, diff)
				}
				return
			}
			var e *api.Error
			if !errors.As(err, &e) || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantText) {
				t.Errorf("decodeRequest(%q) error = %v; want code %s containing %q", tt.line, err, tt.wantCode, tt.wantText)
			}
		})
	}
}

func TestDecodeRequestKeepsID(t *testing.T) {
	got, err := decodeRequest([]byte(`{"v":1,"id":"42","cmd":7}`))
	if err == nil || got.ID != "42" {
		t.Errorf("decodeRequest(bad cmd type) = %+v, %v; want ID 42 and an error", got, err)
	}
}

func TestDecodeArgs(t *testing.T) {
	var a api.SpawnArgs
	req := api.Request{V: 1, Cmd: api.CmdSpawn, Args: json.RawMessage(`{"name":"x","argv":["/bin/true"],"cwd":"/","stale_after":"90s","extra":1}`)}
	if err := decodeArgs(req, &a); err != nil {
		t.Fatalf("decodeArgs(%s) = %v; want nil", req.Args, err)
	}
	want := api.SpawnArgs{Name: "x", Argv: []string{"/bin/true"}, Cwd: "/", StaleAfter: api.Duration(90e9)}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("DecodeArgs mismatch (-want +got):\n%s", diff)
	}
	req.Args = json.RawMessage(`{"stale_after":"soon"}`)
	if err := decodeArgs(req, &a); !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "soon") {
		t.Errorf("decodeArgs(bad duration) = %v; want bad_request naming the value", err)
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
	codes := map[string]bool{api.CodeBadRequest: true, api.CodeUnsupportedVersion: true}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := decodeRequest(line)
		if err != nil {
			var e *api.Error
			if !errors.As(err, &e) || !codes[e.Code] || e.Message == "" {
				t.Fatalf("decodeRequest(%q) error = %#v; want *Error with a known code and a message", line, err)
			}
			if len(req.ID) > maxIDLen {
				t.Fatalf("decodeRequest(%q) returned id of %d bytes", line, len(req.ID))
			}
			return
		}
		if req.V != api.ProtocolVersion || req.Cmd == "" {
			t.Fatalf("decodeRequest(%q) = %+v; want v=1 and a cmd", line, req)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", req, err)
		}
		again, err := decodeRequest(b)
		if err != nil {
			t.Fatalf("decodeRequest(re-encoded %s) = %v", b, err)
		}
		if again.ID != req.ID || again.Cmd != req.Cmd {
			t.Fatalf("round trip changed the request: %+v, then %+v", req, again)
		}
		var a api.SendArgs
		_ = decodeArgs(req, &a) // must not panic; errors are fine
	})
}
