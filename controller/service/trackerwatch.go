package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchTracker wakes the loop whenever the local tracker's store file,
// path, is written (a person's `legion issue comment` or `label`, an
// answer given on the dashboard, an agent's own label), so an answer
// reaches its agent at once instead of at the next interval. It watches
// the store's directory with inotify: every write replaces the file by a
// rename (IN_MOVED_TO), and the directory, created here 0700 when missing,
// outlives every rename. The controller's own writes wake it too, which
// costs one tick that finds nothing more to do. It returns when ctx ends,
// or at once with an error when inotify cannot be set up; the loop then
// keeps its interval.
func watchTracker(ctx context.Context, path string, wake chan<- struct{}) error {
	dir, name := filepath.Dir(path), filepath.Base(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("watch the local tracker %s: %w", path, err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch the local tracker %s: inotify_init1: %w", path, err)
	}
	// A non-blocking fd goes to Go's poller: Read parks the goroutine,
	// and Close (when ctx ends) wakes it with an error.
	f := os.NewFile(uintptr(fd), "inotify "+dir)
	defer f.Close()
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF); err != nil {
		return fmt.Errorf("watch the local tracker %s: inotify_add_watch %s: %w", path, dir, err)
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch the local tracker %s: read inotify events: %w", path, err)
		}
		hit, gone := trackerEvents(buf[:n], name)
		if hit || gone {
			select {
			case wake <- struct{}{}:
			default: // a wake is pending already
			}
		}
		if gone {
			return fmt.Errorf("watch the local tracker %s: its directory was removed or moved", path)
		}
	}
}

// trackerEvents reads a buffer of inotify events and reports whether one
// is about the file name, and whether the watched directory itself went
// away.
func trackerEvents(buf []byte, name string) (hit, gone bool) {
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			break
		}
		file := string(trimNUL(buf[unix.SizeofInotifyEvent:end]))
		switch {
		case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0:
			gone = true
		case ev.Mask&unix.IN_Q_OVERFLOW != 0, file == name:
			hit = true
		}
		buf = buf[end:]
	}
	return hit, gone
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// followTracker runs watchTracker for the whole of ctx, setting it up
// again when the directory is removed (a person starting the tracker
// afresh), and gives up, logging why, when inotify itself fails.
func followTracker(ctx context.Context, path string, wake chan<- struct{}, log *slog.Logger) {
	for ctx.Err() == nil {
		err := watchTracker(ctx, path, wake)
		if err == nil {
			return
		}
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOSYS) {
			log.Warn("the local tracker is not watched: the controller sees its changes at its interval", "err", err)
			return
		}
		log.Debug("the local tracker's watch ended; watching again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
