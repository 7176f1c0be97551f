package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// console is the pty that is the manager's /dev/console, and the goroutine
// copying what is written to it into a file (and Options.Log).
//
// A pty rather than a file: every process of the manager opens
// /dev/console anew, and a terminal appends all their writes in order. And
// if the starting process dies, the pty's controller end closes, and writes
// to the terminal fail instead of blocking the manager.
type console struct {
	// pts is the terminal end. We hold it open until Stop: a pty whose
	// terminal end nobody holds reads as hung up, and the manager opens and
	// closes it per message.
	pts    *os.File
	copied chan struct{} // closed when the copier has ended
	tee    *detachable   // Options.Log, or nil
}

// openConsole makes the pty and starts the copier. The copier ends when
// reading the pty fails: once close has closed pts and the manager's
// processes are gone (EIO), after the buffered output.
func openConsole(path string, log io.Writer) (*console, error) {
	ptm, pts, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty for the manager's console: %w", err)
	}
	if _, err := term.MakeRaw(int(pts.Fd())); err != nil {
		ptm.Close()
		pts.Close()
		return nil, fmt.Errorf("set the manager's console raw: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		ptm.Close()
		pts.Close()
		return nil, err
	}
	c := &console{pts: pts, copied: make(chan struct{})}
	if log != nil {
		c.tee = &detachable{w: log}
	}
	go func() {
		defer close(c.copied)
		defer ptm.Close()
		defer f.Close()
		buf := make([]byte, 32*1024)
		for {
			n, err := ptm.Read(buf)
			if n > 0 {
				// systemd ends console lines with \r\n.
				text := bytes.ReplaceAll(buf[:n], []byte("\r"), nil)
				if c.tee != nil {
					c.tee.Write(text)
				}
				if _, werr := f.Write(text); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return c, nil
}

// detachable passes writes on to w until the first error or detach.
type detachable struct {
	mu sync.Mutex
	w  io.Writer // nil once detached
}

func (d *detachable) Write(p []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil {
		return
	}
	if _, err := d.w.Write(p); err != nil {
		d.w = nil // the caller's writer is broken; the file copy goes on
	}
}

func (d *detachable) detach() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.w = nil
}
