package ptyworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// connectHelloTimeout bounds Connect's dial and hello.
const connectHelloTimeout = 30 * time.Second

// Connect is `legion-pty-worker --connect`, run in a session's container
// on a cluster by exec through the API server: it says hello to the
// session's worker as the session's helper (the spec at specPath has the
// token and daemon id; the socket is socket, else the spec's) and then
// relays in to the worker's socket and the socket to out, until the
// worker closes the connection. So the exec stream is a connection to
// the worker past its hello, as the helper's attach broker hands one out
// on the machine. Whoever may exec into the pod may do this: on a
// cluster, RBAC on pods/exec is what guards a session, as the helper's
// socket (SO_PEERCRED) does on a machine.
//
// The relay carries bytes only: a ring's descriptor ('M' frames) cannot
// cross it, so clients of a relayed connection attach without mapped.
func Connect(ctx context.Context, specPath, socket string, in io.Reader, out io.Writer) error {
	spec, err := proto.ReadVolumeSpec(specPath)
	if err != nil {
		return err
	}
	if socket == "" {
		socket = spec.SocketPath()
	}
	hctx, cancel := context.WithTimeout(ctx, connectHelloTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(hctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("session %s: dial its worker: %w", spec.Name, err)
	}
	uc := c.(*net.UnixConn)
	wc := proto.NewClient(uc)
	hr, err := wc.HelloAs(hctx, proto.HelloParams{
		RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor,
		DaemonInstanceID: spec.DaemonInstanceID, Token: spec.Token, SessionID: spec.SessionID,
		Client: "legion-pty-worker --connect (exec)",
	})
	if err != nil {
		wc.Close()
		return fmt.Errorf("session %s: hello to its worker at %s: %w", spec.Name, socket, err)
	}
	if hr.SessionID != spec.SessionID {
		wc.Close()
		return fmt.Errorf("session %s: the worker at %s hosts session %s", spec.Name, socket, hr.SessionID)
	}
	// After hello the worker sends nothing until asked: closing the
	// client (its reader) loses no byte of the duplicate's.
	f, err := uc.File()
	wc.Close()
	if err != nil {
		return fmt.Errorf("duplicate the worker's socket: %w", err)
	}
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	defer nc.Close()
	go func() {
		_, _ = io.Copy(nc, in)
		// The client is done: the worker sees the end and closes.
		_ = nc.(*net.UnixConn).CloseWrite()
	}()
	if _, err := io.Copy(out, nc); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("session %s: relay from its worker: %w", spec.Name, err)
	}
	return nil
}

// transcriptPoll is how often Transcript with follow looks for new bytes.
const transcriptPoll = 100 * time.Millisecond

// Transcript is `legion-pty-worker --transcript`, run by exec in a
// session's container on a cluster for sessions.logs: it writes the
// offset it starts at (offset, or tail bytes before the end; decimal,
// one line), then the session's transcript from there. With follow it
// keeps writing what the worker appends until stop is closed (the exec's
// stdin ended: the helper is done) or ctx ends.
func Transcript(ctx context.Context, specPath string, offset, tail int64, follow bool, stop <-chan struct{}, out io.Writer) error {
	spec, err := proto.ReadVolumeSpec(specPath)
	if err != nil {
		return err
	}
	// pause waits a poll; false when it is time to stop.
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		case <-time.After(transcriptPoll):
			return true
		}
	}
	path := spec.TranscriptPath()
	var f *os.File
	for {
		f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || !follow {
			return fmt.Errorf("session %s: %w", spec.Name, err)
		}
		if !pause() {
			return nil
		}
	}
	defer f.Close()
	if tail > 0 {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		offset = max(0, fi.Size()-tail)
	}
	if _, err := fmt.Fprintf(out, "%d\n", offset); err != nil {
		return err
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := f.ReadAt(buf, offset)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return err
			}
			offset += int64(n)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if !follow || !pause() {
			return nil
		}
	}
}
