package ptyworker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unsafe"

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
// Close wakes a waiting reader or writer (through an eventfd in every poll
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

// closedError is what a call on a closed master returns: an
// *os.PathError wrapping os.ErrClosed, as os.File's.
func closedError(op string) error {
	return &os.PathError{Op: op, Path: ptmxName, Err: os.ErrClosed}
}

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
// Only the first call does anything: a second one returns at once, maybe
// before the descriptor is closed. It must not be called from an ioctl
// callback (it would wait for that call to end).
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

// errClosing: Close began while a call waited.
var errClosing = errors.New("closing")

// wait polls fd for events until it is ready, Close begins (errClosing),
// or timeout passes (timeout < 0: no limit). A nil error says only "try
// again": the caller retries its call and checks its own deadline. hup
// reports that the terminal's other side is gone (POLLHUP, POLLERR), which
// a writer cannot wait out.
func (m *ptmx) wait(events int16, timeout time.Duration) (hup bool, err error) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	fds := []unix.PollFd{{Fd: int32(m.fd), Events: events}, {Fd: int32(m.stop), Events: unix.POLLIN}}
	switch _, err := unix.Poll(fds, ms); {
	case err == unix.EINTR:
		return false, nil
	case err == unix.ENOMEM:
		time.Sleep(10 * time.Millisecond) // out of kernel memory for a moment
		return false, nil
	case err != nil:
		return false, err
	}
	if fds[1].Revents != 0 {
		return false, errClosing
	}
	return fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0, nil
}

// readAvailable waits for output, then takes all the terminal holds, up to
// len(buf), and returns how much it took. The kernel passes PTY output on
// in pieces of about 4 KiB, so during a flood one read(2) per piece, each
// handed to the consumers (a wake-up, a frame to each client), would cost
// the worker more than the reading; taking what is already there needs
// only one more read(2) (EAGAIN) and costs a lone keystroke's echo nothing
// but that.
//
// Errors are *os.PathError, as os.File.Read's: EIO at the end of output
// (once every holder of the terminal closed it), os.ErrClosed once the
// master was closed; io.EOF for a read of 0.
func (m *ptmx) readAvailable(buf []byte) (int, error) {
	if !m.acquire() {
		return 0, closedError("read")
	}
	defer m.release()
	n, hup := 0, false
	for n < len(buf) {
		k, err := readNonblock(m.fd, buf[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN && n > 0:
			return n, nil
		case err == unix.EAGAIN && hup:
			// Linux says EIO here; should a kernel not, do not spin.
			return 0, &os.PathError{Op: "read", Path: ptmxName, Err: unix.EIO}
		case err == unix.EAGAIN:
			var werr error
			if hup, werr = m.wait(unix.POLLIN, -1); werr == errClosing {
				return 0, closedError("read")
			} else if werr != nil {
				return 0, &os.PathError{Op: "poll", Path: ptmxName, Err: werr}
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

// readNonblock is read(2) on the non-blocking master, made as a raw system
// call: one the Go runtime is not told about, as it need not be for a call
// that does not sleep (the kernel answers EAGAIN instead).
//
// An ordinary call tells the runtime the thread may block. During a flood
// the reader makes one every few microseconds, and the runtime's monitor
// thread, finding a processor in a system call each time it looks, keeps
// looking at its fastest rate (every 20 µs) and hands the processor to
// another thread: about 2,000 wake-ups and 25 ms of CPU per 32 MiB of
// output, taken from the agent and the kernel's tty worker on a small
// machine. The wait in poll(2), which does sleep, stays an ordinary call.
func readNonblock(fd int, p []byte) (int, error) {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// errWriteTimeout: the agent did not read its input in time.
var errWriteTimeout = errors.New("write timed out")

// write writes all of p, waiting at most timeout for the agent to make room.
func (m *ptmx) write(p []byte, timeout time.Duration) error {
	if !m.acquire() {
		return closedError("write")
	}
	defer m.release()
	m.wmu.Lock()
	defer m.wmu.Unlock()
	deadline := time.Now().Add(timeout)
	hup := false
	for len(p) > 0 {
		if m.isClosing() { // Close began while this write queued on wmu
			return closedError("write")
		}
		k, err := unix.Write(m.fd, p)
		if k > 0 {
			p = p[k:]
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN && hup:
			// The agent's side is gone and its input queue is full: no
			// room will come.
			return &os.PathError{Op: "write", Path: ptmxName, Err: unix.EIO}
		case err == unix.EAGAIN:
			left := time.Until(deadline)
			if left <= 0 {
				return errWriteTimeout
			}
			var werr error
			if hup, werr = m.wait(unix.POLLOUT, left); werr == errClosing {
				return closedError("write")
			} else if werr != nil {
				return &os.PathError{Op: "poll", Path: ptmxName, Err: werr}
			}
		case err != nil:
			return &os.PathError{Op: "write", Path: ptmxName, Err: err}
		case k == 0:
			return &os.PathError{Op: "write", Path: ptmxName, Err: io.ErrShortWrite}
		}
	}
	return nil
}

func (m *ptmx) isClosing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closing
}

// ioctl runs f on the descriptor unless the master is closed. f must not
// call Close.
func (m *ptmx) ioctl(f func(fd int) error) error {
	if !m.acquire() {
		return closedError("ioctl")
	}
	defer m.release()
	return f(m.fd)
}
