package sdtest

import (
	"bytes"
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// openConsole makes the pty that becomes the manager's /dev/console and
// starts copying what is written to it into m.consolePath.
//
// A pty rather than a file: every process of the manager opens
// /dev/console anew, and a terminal appends all their writes in order. And
// if the test process dies, the pty's controller end closes, and writes to
// the terminal fail instead of blocking the manager.
func (m *Manager) openConsole() error {
	ptm, pts, err := pty.Open()
	if err != nil {
		return fmt.Errorf("open pty for the manager's console: %w", err)
	}
	if _, err := term.MakeRaw(int(pts.Fd())); err != nil {
		ptm.Close()
		pts.Close()
		return fmt.Errorf("set the manager's console raw: %w", err)
	}
	log, err := os.OpenFile(m.consolePath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		ptm.Close()
		pts.Close()
		return err
	}
	// We keep pts open until stop: a pty whose terminal end nobody holds
	// reads as hung up, and the manager opens and closes it per message.
	m.console = pts
	// The copier ends when reading the pty fails: once stop has closed pts
	// and the manager's processes are gone (EIO), after the buffered output.
	go func() {
		defer close(m.copied)
		defer ptm.Close()
		defer log.Close()
		buf := make([]byte, 32*1024)
		for {
			n, err := ptm.Read(buf)
			if n > 0 {
				// systemd ends console lines with \r\n.
				if _, werr := log.Write(bytes.ReplaceAll(buf[:n], []byte("\r"), nil)); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return nil
}
