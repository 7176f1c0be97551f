package ptyworker

// The writing half of a connection: control messages and output frames, in
// order, from one goroutine per connection.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
	"golang.org/x/sys/unix"
)

// writeLoop writes queued control items and the attachment's output, in
// order, until the connection is shut down or a write fails; then it closes
// the connection (which ends readLoop).
func (c *conn) writeLoop() {
	defer c.nc.Close()
	var active *subscriber
	var buf []byte
	pause := time.NewTimer(floodPause)
	pause.Stop()
	var taken int // output bytes sent since the last wait
	for {
		select {
		case it := <-c.ctrl:
			if !c.writeItem(it, &active, &buf) {
				return
			}
			continue
		case <-c.done:
			c.flushQueued(&active, &buf)
			return
		default:
		}
		var wake chan struct{}
		var paused <-chan time.Time
		if active != nil {
			if active.dropped.Load() {
				c.writeDesync(active)
				return
			}
			n, err := c.sendOutput(active, ^uint64(0), &buf)
			if err != nil {
				return
			}
			if n > 0 {
				taken += n
				continue
			}
			if active.dropped.Load() {
				continue
			}
			wake = active.wake
			if taken >= floodMin {
				// A flood: look again after floodPause, or once a
				// batch is pending, not at each read of the PTY.
				active.lazy.Store(true)
				pause.Reset(floodPause)
				paused = pause.C
			}
		}
		taken = 0
		select {
		case it := <-c.ctrl:
			if !c.writeItem(it, &active, &buf) {
				return
			}
		case <-wake:
		case <-paused:
		case <-c.done:
			c.flushQueued(&active, &buf)
			return
		}
		if paused != nil {
			pause.Stop()
			if active != nil {
				active.lazy.Store(false)
			}
		}
	}
}

// flushQueued writes what is still queued, with a short deadline, when the
// connection is being shut down.
func (c *conn) flushQueued(active **subscriber, buf *[]byte) {
	c.nc.SetWriteDeadline(time.Now().Add(flushDeadline))
	for {
		select {
		case it := <-c.ctrl:
			if !c.writeItem(it, active, buf) {
				return
			}
		default:
			return
		}
	}
}

// writeItem performs one queued item; false means stop (write failed or
// the item closes the connection).
func (c *conn) writeItem(it ctrlItem, active **subscriber, buf *[]byte) bool {
	if it.flush && *active != nil {
		for {
			if (*active).dropped.Load() {
				c.writeDesync(*active)
				return false
			}
			if (*active).next.Load() >= it.flushTo {
				break
			}
			n, err := c.sendOutput(*active, it.flushTo, buf)
			if err != nil {
				return false
			}
			if n == 0 {
				break
			}
		}
	}
	if it.ring {
		if err := c.writeRing(it.ringOff); err != nil {
			return false
		}
	}
	if it.frame != nil {
		if _, err := c.nc.Write(it.frame); err != nil {
			return false
		}
	}
	if it.snapshot != nil {
		h := proto.OffsetHeader(proto.FrameSnapshot, it.snapOff, len(it.snapshot))
		bufs := net.Buffers{h[:], it.snapshot}
		if _, err := bufs.WriteTo(c.nc); err != nil {
			return false
		}
	}
	if it.activate != nil {
		*active = it.activate
	}
	if it.deactivate {
		*active = nil
	}
	if it.exit {
		c.exitSent.Store(true)
	}
	return !it.closeAfter
}

// sendOutput writes one data frame of the subscriber's pending output, at
// most up to offset limit. It returns how many output bytes it sent.
func (c *conn) sendOutput(s *subscriber, limit uint64, buf *[]byte) (int, error) {
	if *buf == nil {
		*buf = make([]byte, proto.DataChunk)
	}
	off := s.next.Load()
	if off >= limit {
		return 0, nil
	}
	if s.mapped {
		return c.sendHead(s, min(c.w.out.head(), limit))
	}
	want := min(uint64(len(*buf)), limit-off)
	n, err := c.w.out.readAt((*buf)[:want], off)
	if errors.Is(err, ErrTooOld) {
		s.dropped.Store(true)
		c.w.out.unsubscribe(s)
		return 0, nil
	}
	if err != nil || n == 0 {
		return 0, nil
	}
	h := proto.OffsetHeader(proto.FrameData, off, n)
	bufs := net.Buffers{h[:], (*buf)[:n]}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return 0, err
	}
	s.next.Store(off + uint64(n))
	return n, nil
}

// writeRing sends a mapped client the ring: an 'M' frame with the memfd.
func (c *conn) writeRing(from uint64) error {
	h := proto.OffsetHeader(proto.FrameRing, from, 0)
	n, _, err := c.nc.WriteMsgUnix(h[:], unix.UnixRights(c.w.out.ring.FD()), nil)
	if err == nil && n < len(h) { // the descriptor went with the first bytes
		_, err = c.nc.Write(h[n:])
	}
	return err
}

// sendHead tells a mapped subscriber that output reaches head; it returns
// how many output bytes that covers.
func (c *conn) sendHead(s *subscriber, head uint64) (int, error) {
	off := s.next.Load()
	if head <= off {
		return 0, nil
	}
	h := proto.OffsetHeader(proto.FrameHead, head, 0)
	if _, err := c.nc.Write(h[:]); err != nil {
		return 0, err
	}
	s.next.Store(head)
	return int(head - off), nil
}

// writeDesync tells a dropped client where it stopped; the caller closes.
func (c *conn) writeDesync(s *subscriber) {
	_, head, _ := c.w.out.bounds()
	d := proto.DesyncEventData{
		Offset: s.next.Load(),
		Reason: fmt.Sprintf("client fell more than %d bytes behind the output (head %d); reattach from offset %d or take a snapshot", s.limit, head, s.next.Load()),
	}
	c.log.Warn("dropping a slow client", "behind", head-d.Offset)
	f, err := eventFrame(proto.EventDesync, d)
	if err != nil {
		return
	}
	c.nc.SetWriteDeadline(time.Now().Add(dropDeadline))
	if _, err := c.nc.Write(f); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		c.log.Debug("desync event not delivered", "err", err)
	}
}
