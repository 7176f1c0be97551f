package activation

import (
	"context"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/ptyworker/proto"
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
// The hello is said with a proto.Client on the connection. Its reader
// cannot swallow a byte meant for the client: after hello the worker
// sends nothing until it gets another request, and the Client is closed
// (its reader stopped) before the duplicate descriptor is handed over.

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
	wc := proto.NewClient(uc)
	defer wc.Close() // closes uc; the returned file is a duplicate
	hr, err := wc.HelloAs(ctx, proto.HelloParams{
		RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor,
		DaemonInstanceID: daemonID, Token: token, SessionID: sessionID, Client: "legion helper (attach broker)",
	})
	if err != nil {
		return nil, err // an *proto.RPCError, or "hello: ..."
	}
	if hr.SessionID != sessionID {
		return nil, fmt.Errorf("hello: socket %s hosts session %s, not %s", socket, hr.SessionID, sessionID)
	}
	f, err := uc.File()
	if err != nil {
		return nil, fmt.Errorf("duplicate worker socket: %w", err)
	}
	return f, nil
}

// unixRights is the SCM_RIGHTS control message passing f.
func unixRights(f *os.File) []byte {
	return unix.UnixRights(int(f.Fd()))
}
