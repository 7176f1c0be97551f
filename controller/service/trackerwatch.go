package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
)

// ownWrites tells the controller's own writes to its local tracker from
// everyone else's. A wake on its own write would tick again at once, and
// that tick would read an agent's state from before the write's effect:
// right after a relay typed a prompt, the agent is still in api_error or
// idle until its hook says it took the prompt, and the tick would escalate
// again. So only others' writes wake the loop (the helper's session
// events cover the agents).
type ownWrites struct {
	path string
	mu   sync.Mutex // held across a write and its note, and across a check
	last fileID     // the store file as the controller's last write left it
}

// fileID identifies one version of the store file: every write replaces
// it by a rename, so a new inode (with its size and modification time).
type fileID struct {
	ino, size  int64
	mtimeNanos int64
}

func statID(path string) fileID {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}
	}
	return fileID{ino: int64(st.Ino), size: st.Size, mtimeNanos: st.Mtim.Nano()}
}

// write runs a write of the controller's and notes the file it left.
func (o *ownWrites) write(f func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	err := f()
	o.last = statID(o.path)
	return err
}

// mine reports whether the store file is as the controller's last write
// left it. A person's write that the controller's overwrote since is
// taken for the controller's: the tick that wrote it may have read it
// already, else the next wake or the interval does.
func (o *ownWrites) mine() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return statID(o.path) == o.last
}

// ownTracker is the team's local tracker as the controller writes it:
// every write is noted in own.
type ownTracker struct {
	*local.Store
	own *ownWrites
}

func (t ownTracker) Move(ctx context.Context, id string, to controller.Status) error {
	return t.own.write(func() error { return t.Store.Move(ctx, id, to) })
}

func (t ownTracker) AddLabel(ctx context.Context, id, label string) error {
	return t.own.write(func() error { return t.Store.AddLabel(ctx, id, label) })
}

func (t ownTracker) RemoveLabel(ctx context.Context, id, label string) error {
	return t.own.write(func() error { return t.Store.RemoveLabel(ctx, id, label) })
}

func (t ownTracker) Comment(ctx context.Context, id, text string) error {
	return t.own.write(func() error { return t.Store.Comment(ctx, id, text) })
}

// fileWatch is a file whose writes by others wake the loop: the local
// tracker's store, or the team's wake file (team.WakeFile).
type fileWatch struct {
	path string
	what string     // the file for messages: "the local tracker"
	own  *ownWrites // writes that wake nothing (the controller's own); nil: none
	// woken, when set, is called on every write that wakes the loop,
	// before the wake is sent (the wake file's reason is logged).
	woken func()
}

// watch wakes the loop whenever the file is written by anyone but the
// controller itself (w.own): for the local tracker, a person's `legion
// issue comment` or `label`, an answer given on the dashboard, an agent's
// own label, so an answer reaches its agent at once instead of at the
// next interval; for the wake file, the dashboard's GitHub webhook. It
// watches the file's directory with inotify: every write replaces the
// file by a rename (IN_MOVED_TO), and the directory, created here 0700
// when missing, outlives every rename. It returns when ctx ends, or at
// once with an error when inotify cannot be set up; the loop then keeps
// its interval.
func (w fileWatch) watch(ctx context.Context, wake chan<- struct{}) error {
	path := w.path
	dir, name := filepath.Dir(path), filepath.Base(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("watch %s %s: %w", w.what, path, err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch %s %s: inotify_init1: %w", w.what, path, err)
	}
	// A non-blocking fd goes to Go's poller: Read parks the goroutine,
	// and Close (when ctx ends) wakes it with an error.
	f := os.NewFile(uintptr(fd), "inotify "+dir)
	defer f.Close()
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF); err != nil {
		return fmt.Errorf("watch %s %s: inotify_add_watch %s: %w", w.what, path, dir, err)
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
			return fmt.Errorf("watch %s %s: read inotify events: %w", w.what, path, err)
		}
		hit, gone := trackerEvents(buf[:n], name)
		if hit && !gone && w.own != nil && w.own.mine() {
			continue
		}
		if hit && w.woken != nil {
			w.woken()
		}
		if hit || gone {
			select {
			case wake <- struct{}{}:
			default: // a wake is pending already
			}
		}
		if gone {
			return fmt.Errorf("watch %s %s: its directory was removed or moved", w.what, path)
		}
	}
}

// watchTracker wakes the loop whenever the local tracker's store file,
// path, is written by anyone but the controller itself (own; nil: by
// anyone). See fileWatch.watch.
func watchTracker(ctx context.Context, path string, wake chan<- struct{}, own *ownWrites) error {
	return fileWatch{path: path, what: "the local tracker", own: own}.watch(ctx, wake)
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

// follow runs watch for the whole of ctx, setting it up again when the
// directory is removed (a person starting the tracker afresh), and gives
// up, logging why, when inotify itself fails.
func (w fileWatch) follow(ctx context.Context, wake chan<- struct{}, log *slog.Logger) {
	for ctx.Err() == nil {
		err := w.watch(ctx, wake)
		if err == nil {
			return
		}
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOSYS) {
			log.Warn(w.what+" is not watched: the controller sees its changes at its interval", "err", err)
			return
		}
		log.Debug(w.what+"'s watch ended; watching again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// followTracker follows the local tracker's store file, path (see
// fileWatch.follow).
func followTracker(ctx context.Context, path string, wake chan<- struct{}, own *ownWrites, log *slog.Logger) {
	fileWatch{path: path, what: "the local tracker", own: own}.follow(ctx, wake, log)
}
