package ptyworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// relayEventTimeout bounds the call of an event that no person answers
// (proto.RelayDialTimeout the dial and hello).
const relayEventTimeout = 30 * time.Second

// RelayHook is `legion hook`: Claude Code runs it for a hook event with
// the event's JSON payload on stdin (so do Codex and the Gemini CLI). When
// the agent's environment names a hook dialect (proto.EnvHookDialect, set
// by a kind whose payloads are not Claude Code's), dialect looks it up and
// the payload is translated to Claude Code's first; an unknown one is an
// error and the payload is forwarded as it is. It reads the
// payload (at most MaxHookPayload bytes), forwards it to the session's worker (getenv's
// EnvHookSocket, hello with its EnvHookToken) and writes what the worker
// answers to stdout: nothing, or a PermissionRequest's decision for
// Claude Code to read. A PermissionRequest waits for the worker's answer
// without a time limit of its own (Claude Code's hook timeout bounds it,
// and ctx); other events get relayEventTimeout.
//
// Outside a Legion session (no EnvHookSocket) it does nothing and returns
// nil. The caller exits 0 whatever it returns (an error goes to stderr):
// a hook that fails must not stop the agent.
func RelayHook(ctx context.Context, stdin io.Reader, stdout io.Writer, getenv func(string) string, dialect func(name string) (proto.HookDialect, bool)) error {
	socket, token := getenv(proto.EnvHookSocket), getenv(proto.EnvHookToken)
	if socket == "" {
		return nil
	}
	if token == "" {
		return fmt.Errorf("hook: %s is set but %s is not: the worker sets both", proto.EnvHookSocket, proto.EnvHookToken)
	}
	payload, err := io.ReadAll(io.LimitReader(stdin, MaxHookPayload+1))
	if err != nil {
		return fmt.Errorf("hook: read the payload from stdin: %w", err)
	}
	if len(payload) > MaxHookPayload {
		return fmt.Errorf("hook: the payload on stdin is over %d bytes; not forwarded", MaxHookPayload)
	}
	payload = bytes.TrimSpace(payload)
	if !json.Valid(payload) {
		return fmt.Errorf("hook: the payload on stdin is not JSON (%s); not forwarded", describeJSON(payload))
	}
	var unknown error
	if name := getenv(proto.EnvHookDialect); name != "" {
		if d, ok := dialect(name); ok {
			payload = d.Translate(payload)
		} else {
			unknown = fmt.Errorf("hook: %s=%s names no hook dialect Legion knows; forwarded untranslated", proto.EnvHookDialect, name)
		}
	}
	payload = ShrinkHookPayload(payload)
	dctx, cancel := context.WithTimeout(ctx, proto.RelayDialTimeout)
	defer cancel()
	c, err := proto.Dial(dctx, socket)
	if err != nil {
		return fmt.Errorf("hook: %w", err)
	}
	defer c.Close()
	if _, err := c.HelloAs(dctx, proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: token, Client: "legion hook"}); err != nil {
		return fmt.Errorf("hook: hello to the worker at %s: %w", socket, err)
	}
	cctx := ctx
	if !isPermissionRequest(payload) {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, relayEventTimeout)
		defer cancel()
	}
	out, err := c.Hook(cctx, payload)
	if err != nil {
		return errors.Join(unknown, fmt.Errorf("hook: %w", err))
	}
	if len(out) == 0 {
		return unknown
	}
	if _, err := stdout.Write(append(out, '\n')); err != nil {
		return errors.Join(unknown, fmt.Errorf("hook: write the answer: %w", err))
	}
	return unknown
}

// isPermissionRequest reports whether payload is a PermissionRequest
// event, whose answer may wait for a person.
func isPermissionRequest(payload []byte) bool {
	var p struct {
		Name string `json:"hook_event_name"`
	}
	return json.Unmarshal(payload, &p) == nil && p.Name == HookPermissionRequest
}
