package activation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/legion-dev/legion/activation/api"
)

// defaultMaxRequest is the longest request line the helper accepts by
// default, newline included. Longer lines get too_large and the
// connection is closed.
const defaultMaxRequest = 256 << 10

// maxIDLen bounds api.Request.ID.
const maxIDLen = 64

// decodeRequest parses one request line (with or without its trailing
// newline). It checks what every command needs: valid UTF-8 JSON, an
// object, "v" equal to api.ProtocolVersion, an ID of at most 64 bytes, a
// non-empty cmd and args that are an object when present. Command args are
// decoded later, by the command. The error is always an *api.Error with code
// bad_request or unsupported_version; the api.Request returned with it carries
// the ID when one could be read, so the answer can be matched.
func decodeRequest(line []byte) (api.Request, error) {
	line = bytes.TrimRight(line, "\r\n")
	var req api.Request
	if len(bytes.TrimSpace(line)) == 0 {
		return req, api.Errorf(api.CodeBadRequest, "empty request line: want one JSON object per line")
	}
	if !utf8.Valid(line) {
		return req, api.Errorf(api.CodeBadRequest, "request is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&req); err != nil {
		return api.Request{ID: salvageID(line)}, api.Errorf(api.CodeBadRequest, "malformed request: %v", jsonProblem(err))
	}
	if dec.More() {
		return api.Request{ID: req.ID}, api.Errorf(api.CodeBadRequest, "malformed request: trailing data after the JSON object")
	}
	if len(req.ID) > maxIDLen {
		return api.Request{}, api.Errorf(api.CodeBadRequest, "request id is %d bytes long, at most %d allowed", len(req.ID), maxIDLen)
	}
	if req.V != api.ProtocolVersion {
		return req, api.Errorf(api.CodeUnsupportedVersion, "protocol version %d is not supported: this helper speaks \"v\":%d", req.V, api.ProtocolVersion)
	}
	if req.Cmd == "" {
		return req, api.Errorf(api.CodeBadRequest, `request has no "cmd"`)
	}
	if len(req.Args) > 0 {
		if a := bytes.TrimSpace(req.Args); len(a) == 0 || (a[0] != '{' && !bytes.Equal(a, []byte("null"))) {
			return req, api.Errorf(api.CodeBadRequest, "%s: args must be a JSON object", req.Cmd)
		}
	}
	return req, nil
}

// decodeArgs decodes a request's args into v (a pointer to the command's
// args struct). Missing args decode as {}. Unknown fields are ignored (see
// the evolution rule in package api).
func decodeArgs(req api.Request, v any) error {
	if len(req.Args) == 0 || bytes.Equal(bytes.TrimSpace(req.Args), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(req.Args, v); err != nil {
		return api.Errorf(api.CodeBadRequest, "%s: bad args: %v", req.Cmd, jsonProblem(err))
	}
	return nil
}

// salvageID returns the "id" of a request that failed to decode as a
// whole, when the line is at least a JSON object with a string id.
func salvageID(line []byte) string {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &probe) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(probe.ID, &id) != nil || len(id) > maxIDLen {
		return ""
	}
	return id
}

// jsonProblem turns encoding/json errors into a short, client-facing text.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q: got JSON %s, want %s", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("got JSON %s, want %s", te.Value, te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)
	}
	return err.Error()
}

// marshalResult encodes a command result; results are plain structs, so a
// failure is a programming error reported as internal.
func marshalResult(v any) (json.RawMessage, *api.Error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, api.Errorf(api.CodeInternal, "encode result: %v", err)
	}
	return b, nil
}
