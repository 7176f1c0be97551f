package activation

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/ptyworker"
)

// Attach is brokered by passing a descriptor, not by handing out the
// worker's socket path and token:
//
//   - the control token never leaves the helper (it is a session secret;
//     a dashboard or a log of API traffic never sees it);
//   - the helper checks, before it hands anything over, that the socket
//     answers as the session's worker (hello with this helper's daemon id
//     and the session's token, and the same session id), so a client can
//     never be sent to a quarantined or foreign worker;
//   - the client's connection is to the worker itself, so an attached
//     terminal keeps working while the helper exits idle, is restarted or
//     is killed.
//
// The hello is done here on a plain socket, frame by frame, so that no
// reader goroutine can swallow a byte meant for the client.

// brokerHello dials the worker at socket, says hello as this helper and
// returns the connected socket as a file, ready to pass with SCM_RIGHTS.
func brokerHello(ctx context.Context, socket, daemonID, token, sessionID string) (*os.File, error) {
	ctx, cancel := context.WithTimeout(ctx, workerCallTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("dial worker %s: %w", socket, err)
	}
	uc := c.(*net.UnixConn)
	defer uc.Close() // the returned file is a duplicate
	if dl, ok := ctx.Deadline(); ok {
		uc.SetDeadline(dl)
	}
	params, err := json.Marshal(ptyworker.HelloParams{
		RPCMajor: ptyworker.RPCMajor, RPCMinor: ptyworker.RPCMinor,
		DaemonInstanceID: daemonID, Token: token, SessionID: sessionID, Client: "legion helper (attach broker)",
	})
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(wireMessage{ID: 1, Method: ptyworker.MethodHello, Params: params})
	if err != nil {
		return nil, err
	}
	if err := ptyworker.WriteFrame(uc, ptyworker.FrameControl, req); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	typ, p, err := ptyworker.ReadFrame(uc, nil)
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if typ != ptyworker.FrameControl {
		return nil, fmt.Errorf("hello: worker answered with a %q frame", typ)
	}
	var m wireMessage
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, fmt.Errorf("hello: malformed answer: %w", err)
	}
	if m.Error != nil {
		return nil, m.Error
	}
	var hr ptyworker.HelloResult
	if err := json.Unmarshal(m.Result, &hr); err != nil {
		return nil, fmt.Errorf("hello: malformed result: %w", err)
	}
	if hr.SessionID != sessionID {
		return nil, fmt.Errorf("hello: socket %s hosts session %s, not %s", socket, hr.SessionID, sessionID)
	}
	uc.SetDeadline(time.Time{})
	f, err := uc.File()
	if err != nil {
		return nil, fmt.Errorf("duplicate worker socket: %w", err)
	}
	return f, nil
}

// wireMessage is one control message of the worker protocol (see
// package ptyworker's protocol.go).
type wireMessage struct {
	ID     uint64              `json:"id,omitempty"`
	Method string              `json:"method,omitempty"`
	Params json.RawMessage     `json:"params,omitempty"`
	Result json.RawMessage     `json:"result,omitempty"`
	Error  *ptyworker.RPCError `json:"error,omitempty"`
	Event  string              `json:"event,omitempty"`
	Data   json.RawMessage     `json:"data,omitempty"`
}

// unixRights is the SCM_RIGHTS control message passing f.
func unixRights(f *os.File) []byte {
	return unix.UnixRights(int(f.Fd()))
}
