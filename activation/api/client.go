package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRecoverWait is how long a Client retries requests that get the
// retryable "recovering" error before giving up.
const DefaultRecoverWait = 60 * time.Second

// Client is a connection to the helper. It is the one module the CLI and
// any Go dashboard use; other languages speak the protocol in protocol.go.
// A Client runs one request at a time (calls are serialised) and is not
// usable after its context was cancelled mid-request.
type Client struct {
	// RecoverWait bounds the retries of requests refused with "recovering"
	// (backoff from 5 ms growing by half up to 25 ms: recovery takes tens
	// of milliseconds, a refused request costs the helper next to nothing,
	// and a client that sleeps long only adds to the wait). Zero means DefaultRecoverWait; a
	// negative value disables retries.
	RecoverWait time.Duration

	path string // where it dialed, for a reconnect

	mu     sync.Mutex
	conn   *net.UnixConn
	rd     msgReader
	next   uint64
	broken error
}

// Dial connects to the helper at SocketPath. Through legion.socket the
// first connection starts the helper.
func Dial(ctx context.Context) (*Client, error) {
	path, err := SocketPath()
	if err != nil {
		return nil, err
	}
	return DialPath(ctx, path)
}

// DialPath connects to a helper listening at path.
func DialPath(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("connect to the helper at %s: %w: is legion.socket installed and started (`legion install`, `systemctl --user start legion.socket`), or `legion helper` running?", path, err)
		}
		return nil, fmt.Errorf("connect to the helper at %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	return &Client{path: path, conn: uc, rd: msgReader{c: uc, max: maxResponse}}, nil
}

// Redial returns a new Client for the same socket, with the same
// RecoverWait: for a caller whose connection broke because the helper
// restarted.
func (c *Client) Redial(ctx context.Context) (*Client, error) {
	n, err := DialPath(ctx, c.path)
	if err != nil {
		return nil, err
	}
	n.RecoverWait = c.RecoverWait
	return n, nil
}

// Close closes the connection (an attached worker socket returned by
// Attach stays open).
func (c *Client) Close() error {
	c.rd.closeFDs()
	return c.conn.Close()
}

// Call sends cmd with args and decodes the result into result (a pointer,
// or nil). A refused request returns an *Error. Requests refused with
// "recovering" are retried with backoff for RecoverWait.
func (c *Client) Call(ctx context.Context, cmd string, args, result any) error {
	resp, fds, err := c.retry(ctx, cmd, args, nil)
	closeAll(fds)
	if err != nil {
		return err
	}
	return decodeResult(cmd, resp, result)
}

// List returns every session and the counts of the helper's last recovery.
func (c *Client) List(ctx context.Context) (ListResult, error) {
	var r ListResult
	err := c.Call(ctx, CmdSessionsList, struct{}{}, &r)
	return r, err
}

// Status returns one session.
func (c *Client) Status(ctx context.Context, name string) (Session, error) {
	var r StatusResult
	err := c.Call(ctx, CmdSessionsStatus, NameArgs{Name: name}, &r)
	return r.Session, err
}

// Kill stops a session's unit (systemd stops the worker and its agent; the
// transcript records the end) and returns the session as it ended.
func (c *Client) Kill(ctx context.Context, name string) (Session, error) {
	var r StatusResult
	err := c.Call(ctx, CmdSessionsKill, NameArgs{Name: name}, &r)
	return r.Session, err
}

// Send types text into a session, then Enter unless noEnter.
func (c *Client) Send(ctx context.Context, name, text string, noEnter bool) (Session, error) {
	var r StatusResult
	err := c.Call(ctx, CmdSend, SendArgs{Name: name, Text: text, NoEnter: noEnter}, &r)
	return r.Session, err
}

// Spawn starts a session as a worker unit of its own (see SpawnArgs).
func (c *Client) Spawn(ctx context.Context, args SpawnArgs) (SpawnResult, error) {
	var r SpawnResult
	err := c.Call(ctx, CmdSpawn, args, &r)
	return r, err
}

// OutputError is a failed write to the writer that Logs or FollowLogs was
// given (a closed pipe: `legion sessions logs -f NAME | head`). The helper
// is fine; trying again would fail the same way.
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return "write output: " + e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// Logs writes a session's transcript to w from args.Offset (or its last
// args.Tail bytes): up to its current end, or with args.Follow until the
// session ends for good (it is followed across unit restarts) or ctx is
// done. The result's Offset is where a later call would continue (with
// Tail, still 0 if no byte came). A failed write to w ends it with an
// *OutputError.
func (c *Client) Logs(ctx context.Context, args LogsArgs, w io.Writer) (LogsResult, error) {
	next := args.Offset       // the offset of the next byte w needs
	started := args.Tail <= 0 // with Tail, the first event says where w starts
	onEvent := func(raw json.RawMessage) error {
		var ev LogEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("decode log event: %w", err)
		}
		if !started {
			next, started = ev.Offset, true
		}
		// A retried request restarts at args.Offset; skip what w has.
		data := ev.Data
		if skip := next - ev.Offset; skip > 0 {
			if skip >= int64(len(data)) {
				return nil
			}
			data = data[skip:]
		}
		n, err := w.Write(data)
		next += int64(n)
		if err != nil {
			return &OutputError{Err: err}
		}
		return nil
	}
	resp, fds, err := c.retry(ctx, CmdSessionsLogs, args, onEvent)
	closeAll(fds)
	if err != nil {
		return LogsResult{Offset: next}, err
	}
	var r LogsResult
	err = decodeResult(CmdSessionsLogs, resp, &r)
	return r, err
}

// Attach asks the helper for a connection to a session's worker. The
// returned conn is a unix socket connected to the worker, already past the
// worker's hello: speak the worker protocol (package ptyworker/proto) on it. It
// stays usable when the helper exits or restarts; the caller closes it.
func (c *Client) Attach(ctx context.Context, args AttachArgs) (net.Conn, AttachResult, error) {
	var r AttachResult
	resp, fds, err := c.retry(ctx, CmdAttach, args, nil)
	if err != nil {
		closeAll(fds)
		return nil, r, err
	}
	if err := decodeResult(CmdAttach, resp, &r); err != nil {
		closeAll(fds)
		return nil, r, err
	}
	if len(fds) != 1 {
		closeAll(fds)
		return nil, r, fmt.Errorf("attach %s: the helper sent %d descriptors, want 1", args.Name, len(fds))
	}
	f := os.NewFile(uintptr(fds[0]), "worker:"+args.Name)
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, r, fmt.Errorf("attach %s: use the worker socket: %w", args.Name, err)
	}
	return conn, r, nil
}

// retry runs one request, repeating it while the helper answers
// "recovering".
func (c *Client) retry(ctx context.Context, cmd string, args any, onEvent func(json.RawMessage) error) (Response, []int, error) {
	wait := c.RecoverWait
	if wait == 0 {
		wait = DefaultRecoverWait
	}
	deadline := time.Now().Add(wait)
	backoff := 5 * time.Millisecond
	for {
		resp, fds, err := c.do(ctx, cmd, args, onEvent)
		if err == nil || !errors.Is(err, ErrRecovering) || wait < 0 || time.Now().Add(backoff).After(deadline) {
			if err != nil && errors.Is(err, ErrRecovering) {
				err = fmt.Errorf("%s: the helper is still recovering after %s: %w", cmd, wait, err)
			}
			return resp, fds, err
		}
		closeAll(fds)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return Response{}, nil, ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*3/2, 25*time.Millisecond)
	}
}

// do sends one request and reads until its final response. A refused
// request returns the *Error; transport failures are wrapped errors and
// leave the Client unusable.
func (c *Client) do(ctx context.Context, cmd string, args any, onEvent func(json.RawMessage) error) (Response, []int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return Response{}, nil, fmt.Errorf("%s: connection to the helper is unusable: %w", cmd, c.broken)
	}
	rawArgs, err := json.Marshal(args)
	if err != nil {
		return Response{}, nil, fmt.Errorf("%s: encode args: %w", cmd, err)
	}
	c.next++
	id := strconv.FormatUint(c.next, 10)
	line, err := json.Marshal(Request{V: ProtocolVersion, ID: id, Cmd: cmd, Args: rawArgs})
	if err != nil {
		return Response{}, nil, fmt.Errorf("%s: encode request: %w", cmd, err)
	}
	line = append(line, '\n')

	// Cancelling ctx unblocks reads and writes through the deadline.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if stop() {
			c.conn.SetDeadline(time.Time{})
		}
	}()
	fail := func(what string, err error) (Response, []int, error) {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		c.broken = err
		return Response{}, nil, fmt.Errorf("%s: %s: %w", cmd, what, err)
	}
	if _, err := c.conn.Write(line); err != nil {
		return fail("send request", err)
	}
	for {
		l, err := c.rd.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				err = fmt.Errorf("the helper closed the connection (did it fail to start? see `systemctl --user status legion.service` and `journalctl --user -u legion.service`): %w", err)
			}
			return fail("read response", err)
		}
		var resp Response
		if err := json.Unmarshal(l, &resp); err != nil {
			return fail("decode response", err)
		}
		if resp.ID != id && resp.ID != "" {
			continue // not ours (a response to an abandoned request)
		}
		if resp.Event != nil {
			if onEvent == nil {
				return fail("read response", fmt.Errorf("unexpected stream event"))
			}
			if err := onEvent(resp.Event); err != nil {
				return fail("write stream", err)
			}
			continue
		}
		fds := c.rd.takeFDs()
		if !resp.OK {
			if resp.Error == nil {
				resp.Error = &Error{Code: CodeInternal, Message: "refused without an error"}
			}
			return resp, fds, resp.Error
		}
		return resp, fds, nil
	}
}

func decodeResult(cmd string, resp Response, result any) error {
	if result == nil || len(resp.Result) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("%s: decode result: %w", cmd, err)
	}
	return nil
}

// msgReader reads newline-terminated lines from a unix socket with
// recvmsg, collecting descriptors passed with SCM_RIGHTS (a plain Read
// would make the kernel close them).
type msgReader struct {
	c   *net.UnixConn
	max int
	buf []byte
	fds []int
	p   []byte
	oob []byte
}

func (r *msgReader) readLine() ([]byte, error) {
	if r.p == nil {
		r.p = make([]byte, 64<<10)
		r.oob = make([]byte, unix.CmsgSpace(8*4))
	}
	scanned := 0
	for {
		if i := bytes.IndexByte(r.buf[scanned:], '\n'); i >= 0 {
			i += scanned
			line := append([]byte(nil), r.buf[:i]...)
			r.buf = r.buf[:copy(r.buf, r.buf[i+1:])]
			return line, nil
		}
		scanned = len(r.buf)
		if len(r.buf) > r.max {
			return nil, fmt.Errorf("response line longer than %d bytes", r.max)
		}
		n, oobn, flags, _, err := r.c.ReadMsgUnix(r.p, r.oob)
		n, oobn = max(n, 0), max(oobn, 0) // -1 with some errors
		if oobn > 0 {
			r.collect(r.oob[:oobn])
		}
		if flags&unix.MSG_CTRUNC != 0 {
			return nil, errors.New("passed descriptors were truncated")
		}
		r.buf = append(r.buf, r.p[:n]...)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, io.EOF
		}
	}
}

func (r *msgReader) collect(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err == nil {
			r.fds = append(r.fds, fds...)
		}
	}
}

func (r *msgReader) takeFDs() []int {
	fds := r.fds
	r.fds = nil
	return fds
}

func (r *msgReader) closeFDs() { closeAll(r.takeFDs()) }

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// FollowLogs is `legion sessions logs -f`: it streams a session's
// transcript to w like Client.Logs with Follow, and when the connection
// to the helper breaks (the helper was stopped, restarted or killed) it
// dials again and continues at the next byte, so nothing is printed twice
// or skipped. It gives up when the helper cannot be reached again within
// DefaultRecoverWait, and ends when the session has ended for good, ctx
// is done or a write to w fails (an *OutputError).
func FollowLogs(ctx context.Context, args LogsArgs, w io.Writer) (LogsResult, error) {
	args.Follow = true
	var lastErr error
	deadline := time.Time{}
	for {
		c, err := Dial(ctx)
		if err == nil {
			var res LogsResult
			res, err = c.Logs(ctx, args, w)
			c.Close()
			if err == nil || ctx.Err() != nil {
				return res, err
			}
			var apiErr *Error
			if errors.As(err, &apiErr) && !apiErr.Retryable {
				return res, err // refused: retrying would not change that
			}
			var outErr *OutputError
			if errors.As(err, &outErr) {
				return res, err // w is broken, not the connection
			}
			if res.Offset > args.Offset {
				deadline = time.Time{} // progress: a fresh budget
				args.Tail = 0          // continue from the next byte
			}
			args.Offset = res.Offset
		}
		lastErr = err
		if deadline.IsZero() {
			deadline = time.Now().Add(DefaultRecoverWait)
		}
		if time.Now().After(deadline) {
			return LogsResult{Offset: args.Offset}, fmt.Errorf("follow logs of %s: the helper stayed unreachable: %w", args.Name, lastErr)
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return LogsResult{Offset: args.Offset}, ctx.Err()
		case <-t.C:
		}
	}
}

// Respond delivers a person's answer to what the session's agent waits on
// (see CmdSessionsRespond).
func (c *Client) Respond(ctx context.Context, args RespondArgs) (Session, error) {
	var r StatusResult
	err := c.Call(ctx, CmdSessionsRespond, args, &r)
	return r.Session, err
}

// Reset resets the failed session's unit (see CmdSessionsReset).
func (c *Client) Reset(ctx context.Context, name string) (Session, error) {
	var r StatusResult
	err := c.Call(ctx, CmdSessionsReset, NameArgs{Name: name}, &r)
	return r.Session, err
}

// End ends the session's agent cleanly, its phase done (see CmdSessionsEnd).
func (c *Client) End(ctx context.Context, name, reason string) (Session, error) {
	var r StatusResult
	err := c.Call(ctx, CmdSessionsEnd, EndArgs{Name: name, Reason: reason}, &r)
	return r.Session, err
}
