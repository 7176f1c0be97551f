package ptyworker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ptmx is the master side of the agent's PTY, in non-blocking mode but kept
// out of the Go runtime's network poller: its reader and writers wait in
// poll(2) themselves.
//
// The runtime poller would cost a thread wake-up per chunk of output. The
// kernel hands PTY output to the master in pieces of at most 4 KiB and
// wakes every epoll instance watching the master for each piece, so with
// the master in the poller the thread parked in epoll_wait (the worker's
// sockets and timers keep one there) woke on each of them only to find the
// reader already busy. On a flood that doubled the worker's context
// switches and CPU time, which the agent's own writes pay for on a small
// machine.
//
// close wakes a waiting reader or writer (through an eventfd in every poll
// set) and closes the descriptor only after each has returned, so no call
// ever reaches a descriptor number that was reused.
type ptmx struct {
	fd   int
	stop int // eventfd, readable once close began

	wmu sync.Mutex // one input write at a time, so writes are not interleaved

	mu      sync.Mutex
	users   int // calls in progress on fd
	closing bool
	idle    sync.Cond // signalled when users drops to 0 while closing
}

// readBuf is the PTY reader's buffer: the most one readAvailable hands on.
const readBuf = 64 << 10

// ptmxName names the master in errors, as os.File did.
const ptmxName = "/dev/ptmx"

// errPTMXClosed is what a call on a closed master returns, as an
// *os.PathError wrapping os.ErrClosed.
var errPTMXClosed = &os.PathError{Op: "read", Path: ptmxName, Err: os.ErrClosed}

// newPTMX takes ownership of fd, switching it to non-blocking mode.
func newPTMX(fd int) (*ptmx, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("open pty: eventfd: %w", err)
	}
	m := &ptmx{fd: fd, stop: stop}
	m.idle.L = &m.mu
	return m, nil
}

// acquire registers a call on fd; false: the master is closed.
func (m *ptmx) acquire() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return false
	}
	m.users++
	return true
}

func (m *ptmx) release() {
	m.mu.Lock()
	m.users--
	if m.closing && m.users == 0 {
		m.idle.Broadcast()
	}
	m.mu.Unlock()
}

// Close wakes the calls in progress, waits for them and closes the master.
// Only the first call does anything.
func (m *ptmx) Close() error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil
	}
	m.closing = true
	one := [8]byte{1}
	unix.Write(m.stop, one[:]) // cannot fail: the counter is far from its limit
	for m.users > 0 {
		m.idle.Wait()
	}
	m.mu.Unlock()
	unix.Close(m.stop)
	if err := unix.Close(m.fd); err != nil {
		return &os.PathError{Op: "close", Path: ptmxName, Err: err}
	}
	return nil
}

// wait polls fd for events until it is ready, the master is being closed
// (false), or timeout passes (timeout < 0: no limit). Being woken with
// nothing to do (EINTR, a timeout) reports true: the caller retries its
// call and checks its own deadline.
func (m *ptmx) wait(events int16, timeout time.Duration) bool {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	fds := []unix.PollFd{{Fd: int32(m.fd), Events: events}, {Fd: int32(m.stop), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, ms); err != nil && err != unix.EINTR {
		return false // EFAULT/EINVAL/ENOMEM: nothing to wait for that would end
	}
	return fds[1].Revents == 0
}

// readAvailable waits for output, then takes all the terminal holds, up to
// len(buf), and returns how much it took. The kernel passes PTY output on
// in pieces of about 4 KiB, so during a flood one read(2) per piece, each
// handed to the consumers (a wake-up, a frame to each client), would cost
// the worker more than the reading; taking what is already there needs
// only one more read(2) (EAGAIN) and costs a lone keystroke's echo nothing
// but that.
//
// Errors are as os.File.Read's: an *os.PathError with EIO at the end of
// output, os.ErrClosed once the master was closed, io.EOF for a read of 0.
func (m *ptmx) readAvailable(buf []byte) (int, error) {
	if !m.acquire() {
		return 0, errPTMXClosed
	}
	defer m.release()
	n := 0
	for n < len(buf) {
		k, err := unix.Read(m.fd, buf[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if n > 0 {
				return n, nil
			}
			if !m.wait(unix.POLLIN, -1) {
				return 0, errPTMXClosed
			}
			continue
		case err != nil:
			return n, &os.PathError{Op: "read", Path: ptmxName, Err: err}
		case k == 0:
			return n, io.EOF
		}
		n += k
	}
	return n, nil
}

// errWriteTimeout: the agent did not read its input in time.
var errWriteTimeout = errors.New("write timed out")

// write writes all of p, waiting at most timeout for the agent to make room.
func (m *ptmx) write(p []byte, timeout time.Duration) error {
	if !m.acquire() {
		return &os.PathError{Op: "write", Path: ptmxName, Err: os.ErrClosed}
	}
	defer m.release()
	m.wmu.Lock()
	defer m.wmu.Unlock()
	deadline := time.Now().Add(timeout)
	for len(p) > 0 {
		k, err := unix.Write(m.fd, p)
		if k > 0 {
			p = p[k:]
		}
		switch {
		case err == nil || err == unix.EINTR:
		case err == unix.EAGAIN:
			left := time.Until(deadline)
			if left <= 0 {
				return errWriteTimeout
			}
			if !m.wait(unix.POLLOUT, left) {
				return &os.PathError{Op: "write", Path: ptmxName, Err: os.ErrClosed}
			}
		default:
			return &os.PathError{Op: "write", Path: ptmxName, Err: err}
		}
	}
	return nil
}

// ioctl runs f on the descriptor unless the master is closed.
func (m *ptmx) ioctl(f func(fd int) error) error {
	if !m.acquire() {
		return os.ErrClosed
	}
	defer m.release()
	return f(m.fd)
}
