package activation

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestLogsFollowClosedOutput runs `legion sessions logs -f NAME | head`:
// once the reader of its output is gone, the command must end at once and
// quietly. A write error on the output was taken for a broken connection
// to the helper, and logs -f dialled the helper again and again for a
// minute, then failed with "the helper stayed unreachable".
func TestLogsFollowClosedOutput(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e.spawn(ctx, "talker", "/bin/sh", "-c", streamScript)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, e.bin, "sessions", "logs", "-f", "talker")
	cmd.Env = os.Environ()
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Read a little, as head does, then go away.
	if _, err := io.ReadFull(r, make([]byte, 100)); err != nil {
		t.Fatalf("read the output of logs -f: %v", err)
	}
	r.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || errOut.Len() != 0 {
		t.Errorf("logs -f with its output closed: %v, stderr %q; want exit status 1 and nothing on stderr", err, errOut.String())
	}
}
