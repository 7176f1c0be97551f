package activation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/waitfor"
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

// countingWriter counts the writes Client.Logs makes: one per stream event.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestLogsTail: sessions.logs with Tail sends only the transcript's last
// bytes (one event, where the whole transcript takes many), with the
// offsets of the whole; `legion sessions logs -c N` prints them, and with
// -f what follows too; a bad tail is refused.
func TestLogsTail(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e.spawn(ctx, "bulk", "/bin/sh", "-c", "seq -f 'line %06g' 0 19999; echo DONE; exec sleep 100000")
	c := e.client(ctx)

	var whole countingWriter
	waitfor.Check(t, time.Minute, "the transcript to end with DONE", func() error {
		whole = countingWriter{}
		if _, err := c.Logs(ctx, api.LogsArgs{Name: "bulk"}, &whole); err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if !bytes.Contains(whole.Bytes(), []byte("DONE\r\n")) {
			return fmt.Errorf("%d bytes so far", whole.Len())
		}
		return nil
	})
	full := whole.Bytes()
	const n = 1000
	var tail countingWriter
	res, err := c.Logs(ctx, api.LogsArgs{Name: "bulk", Tail: n}, &tail)
	if err != nil {
		t.Fatalf("Logs with tail %d: %v", n, err)
	}
	if !bytes.Equal(tail.Bytes(), full[len(full)-n:]) || res.Offset != int64(len(full)) {
		t.Errorf("tail %d = %d bytes %q..., next offset %d; want the last %d of the %d-byte transcript, next offset %d",
			n, tail.Len(), tail.Bytes()[:min(40, tail.Len())], res.Offset, n, len(full), len(full))
	}
	if tail.writes != 1 || whole.writes < 5 {
		t.Errorf("tail %d came in %d events, the whole transcript in %d; want 1 (only the tail is read and sent), and several", n, tail.writes, whole.writes)
	}
	var all countingWriter
	if _, err := c.Logs(ctx, api.LogsArgs{Name: "bulk", Tail: int64(len(full)) * 2}, &all); err != nil || !bytes.Equal(all.Bytes(), full) {
		t.Errorf("tail beyond the start = %d bytes, %v; want the whole transcript (%d bytes)", all.Len(), err, len(full))
	}

	if out := e.mustLegion(ctx, "sessions", "logs", "-c", strconv.Itoa(n), "bulk"); out != string(full[len(full)-n:]) {
		t.Errorf("sessions logs -c %d printed %d bytes; want the transcript's last %d", n, len(out), n)
	}
	if _, errOut, err := e.legion(ctx, "sessions", "logs", "--bytes", "-5", "bulk"); exitCode(err) != 2 || !strings.Contains(errOut, "--bytes -5") {
		t.Errorf("sessions logs --bytes -5: %v, stderr %q; want exit status 2 naming the flag", err, errOut)
	}
	for _, bad := range []api.LogsArgs{{Name: "bulk", Tail: -1}, {Name: "bulk", Offset: 5, Tail: 5}} {
		if _, err := c.Logs(ctx, bad, io.Discard); !errors.Is(err, api.ErrBadRequest) {
			t.Errorf("Logs(%+v) = %v; want bad_request", bad, err)
		}
	}

	// -f from the tail: the last bytes, then what the kill appends (the
	// exit marker), until the session ended.
	cmd := exec.CommandContext(ctx, e.bin, "sessions", "logs", "-f", "-c", "50", "bulk")
	cmd.Env = os.Environ()
	var out syncBuffer
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, time.Minute, "logs -f -c 50 to print the tail", func() error {
		if !strings.Contains(out.String(), "DONE") {
			return errors.New("not yet")
		}
		return nil
	})
	if _, err := c.Kill(ctx, "bulk"); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("logs -f -c 50: %v, stderr %q", err, errOut.String())
	}
	if !strings.HasPrefix(out.String(), string(full[len(full)-50:])) || !strings.Contains(out.String(), "[legion]") {
		t.Errorf("logs -f -c 50 printed %q; want the transcript's last 50 bytes, then the exit marker", out.String())
	}
}

// exitCode is the exit status of a command's err (0 for nil, -1 when it
// did not exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
