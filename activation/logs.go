package activation

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/activation/api"
)

// Transcript streaming (sessions.logs).
const (
	logChunk      = 32 << 10               // bytes per stream event
	logPoll       = 100 * time.Millisecond // how often a follower looks for new bytes
	logStateCheck = 500 * time.Millisecond // how often it asks whether the session ended
)

// cmdLogs streams the session's transcript from args.Offset (or its last
// args.Tail bytes, taken when the file is first opened). Without
// follow it stops at the end of the file as it is now; with follow it
// keeps going, across unit restarts (the worker appends every run to the
// same file), until the session has ended for good and every byte was
// sent, the client hangs up, or the helper stops.
func (h *Helper) cmdLogs(ctx context.Context, cc *clientConn, req api.Request) (any, *os.File, error) {
	var a api.LogsArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	if a.Offset < 0 || a.Tail < 0 {
		return nil, nil, api.Errorf(api.CodeBadRequest, "%s: offset %d, tail %d: want 0 or more", req.Cmd, a.Offset, a.Tail)
	}
	if a.Offset > 0 && a.Tail > 0 {
		return nil, nil, api.Errorf(api.CodeBadRequest, "%s: offset and tail both given: want one of them", req.Cmd)
	}
	if v, ok := h.kubeOnlyHere(ctx, a.Name); ok {
		return h.logsKube(ctx, cc, req, v, a)
	}
	s, err := h.lookup(ctx, req.Cmd, a.Name)
	if err != nil {
		return nil, nil, err
	}
	if s.transcript == "" {
		return nil, nil, api.Errorf(api.CodeNotFound, "session %s has no transcript path", s.name)
	}
	off := a.Offset
	buf := make([]byte, logChunk)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var lastCheck time.Time
	over := false
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	for {
		if f == nil {
			f, err = os.OpenFile(s.transcript, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, err
			}
			if err != nil && !a.Follow {
				return nil, nil, api.Errorf(api.CodeNotFound, "session %s has no transcript yet (%s)", s.name, s.transcript)
			}
			if err != nil {
				f = nil
			}
			if f != nil && a.Tail > 0 {
				fi, err := f.Stat()
				if err != nil {
					return nil, nil, err
				}
				off, a.Tail = max(0, fi.Size()-a.Tail), 0
			}
		}
		if f != nil {
			n, rerr := f.ReadAt(buf, off)
			if n > 0 {
				ev, err := json.Marshal(api.LogEvent{Offset: off, Data: buf[:n]})
				if err != nil {
					return nil, nil, err
				}
				if err := cc.send(api.Response{ID: req.ID, Event: ev}, nil); err != nil {
					return nil, nil, err
				}
				off += int64(n)
				continue
			}
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				return nil, nil, rerr
			}
		}
		// At the end of what is there.
		if !a.Follow {
			return api.LogsResult{Offset: off, Reason: "eof"}, nil, nil
		}
		if over {
			return api.LogsResult{Offset: off, Reason: "session ended"}, nil, nil
		}
		if time.Since(lastCheck) >= logStateCheck {
			lastCheck = time.Now()
			if h.sessionOver(ctx, s) {
				over = true // one more read drains what the last run wrote
				continue
			}
			if peerClosed(cc.c) {
				return nil, nil, io.EOF
			}
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// sessionOver reports whether the session has ended for good: killed, or
// its unit gone, inactive or failed (a unit waiting out a restart cooldown
// is not over).
func (h *Helper) sessionOver(ctx context.Context, s *session) bool {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended {
		return true
	}
	states, err := h.unitStates(ctx)
	if err != nil {
		return false
	}
	us := unitState(states, s.unit)
	return us.Stopped()
}

// peerClosed reports whether the client hung up, without consuming input.
func peerClosed(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		closed = n == 0 && err == nil
	})
	return closed
}
