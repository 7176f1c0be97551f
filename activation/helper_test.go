package activation

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/journal"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// inProcess is a Helper run by the test itself (on the sandbox's manager),
// for what needs options: the recovery hook, the peer UID, limits.
type inProcess struct {
	h      *Helper
	socket string
	done   chan error
	cancel context.CancelFunc

	mu     sync.Mutex
	notify []string
}

// startInProcess starts a private manager (unless withManager is false:
// one runs already) and runs a Helper with opts in the background on its
// default socket. Cleanup stops it.
func startInProcess(t testing.TB, withManager bool, opts Options) *inProcess {
	t.Helper()
	if withManager {
		sdtest.Start(t)
	}
	return startInProcessOn(t, nil, opts)
}

// startInProcessOn is startInProcess on listener l (nil: the default
// socket), with a manager already running.
func startInProcessOn(t testing.TB, l net.Listener, opts Options) *inProcess {
	t.Helper()
	if l != nil {
		opts.Listeners = []net.Listener{l}
	}
	ip := &inProcess{done: make(chan error, 1)}
	if opts.Logger == nil {
		opts.Logger = journal.NewTextLogger(testWriter{t}, slog.LevelDebug)
	}
	opts.Notify = func(s string) {
		ip.mu.Lock()
		ip.notify = append(ip.notify, s)
		ip.mu.Unlock()
	}
	if opts.Binary == "" {
		opts.Binary = sdtest.WorkerBinary(t)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ip.h, ip.socket = h, h.opts.SocketPath
	if l != nil {
		ip.socket = l.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	ip.cancel = cancel
	go func() { ip.done <- h.Run(ctx) }()
	t.Cleanup(func() { ip.stop(t) })
	waitfor.Check(t, waitFor, "helper socket "+ip.socket+" to accept", func() error {
		c, err := net.Dial("unix", ip.socket)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-ip.done:
			t.Fatalf("helper Run ended at start: %v", err)
		default:
		}
		return err
	})
	if opts.BeforeRecovery == nil {
		// Tests of raw requests want the answers of a recovered helper.
		waitfor.Check(t, waitFor, "the helper to send READY=1", func() error {
			if n := ip.notified(); !slices.ContainsFunc(n, func(s string) bool { return strings.HasPrefix(s, "READY=1") }) {
				return fmt.Errorf("notified %q", n)
			}
			return nil
		})
	}
	return ip
}

func (ip *inProcess) stop(t testing.TB) {
	ip.cancel()
	select {
	case err, ok := <-ip.done:
		if !ok {
			return // stopped before
		}
		if err != nil {
			t.Errorf("helper Run = %v; want nil on cancel", err)
		}
		close(ip.done)
	case <-time.After(waitFor):
		t.Errorf("helper Run did not return within %v of cancel", waitFor)
	}
}

func (ip *inProcess) notified() []string {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return append([]string(nil), ip.notify...)
}

func (ip *inProcess) client(t testing.TB) *api.Client {
	t.Helper()
	c, err := api.DialPath(t.Context(), ip.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// rawConn is a line-level connection for malformed input.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, socket string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// roundTrip writes line and reads one response.
func (r *rawConn) roundTrip(t *testing.T, line string) api.Response {
	t.Helper()
	if _, err := r.c.Write([]byte(line)); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
	return r.read(t)
}

func (r *rawConn) read(t *testing.T) api.Response {
	t.Helper()
	r.c.SetReadDeadline(time.Now().Add(waitFor))
	l, err := r.br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	var resp api.Response
	if err := json.Unmarshal(l, &resp); err != nil {
		t.Fatalf("response %q: %v", l, err)
	}
	return resp
}

// TestRecoveringBarrier: until recovery is done every command, known or
// not, gets the retryable "recovering" error and READY=1 is not sent; a
// client retrying gets its answer once recovery ends.
func TestRecoveringBarrier(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	ip := startInProcess(t, true, Options{BeforeRecovery: func(ctx context.Context) error {
		close(entered)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	<-entered
	c := ip.client(t)
	c.RecoverWait = -1 // no retries: see the error itself
	for _, cmd := range []string{api.CmdSessionsList, api.CmdSessionsStatus, api.CmdSessionsLogs, api.CmdSessionsKill, api.CmdSend, api.CmdAttach, api.CmdSpawn, api.CmdSessionsWatch, api.CmdTeamStop, "no.such"} {
		err := c.Call(t.Context(), cmd, api.NameArgs{Name: "x"}, nil)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeRecovering || !e.Retryable {
			t.Errorf("%s during recovery = %v; want a retryable recovering error", cmd, err)
		}
	}
	for _, n := range ip.notified() {
		if strings.Contains(n, "READY=1") {
			t.Errorf("notified %q during recovery; want READY=1 only after it", n)
		}
	}
	// A retrying client (the CLI's default) gets through once recovery ends.
	got := make(chan error, 1)
	go func() {
		c2, err := api.DialPath(context.Background(), ip.socket)
		if err != nil {
			got <- err
			return
		}
		defer c2.Close()
		_, err = c2.List(context.Background())
		got <- err
	}()
	close(release)
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("List retried across recovery = %v; want success", err)
		}
	case <-time.After(waitFor):
		t.Fatal("List did not return after recovery ended")
	}
	if !slices.ContainsFunc(ip.notified(), func(s string) bool { return strings.HasPrefix(s, "READY=1") }) {
		t.Errorf("notifications %q; want READY=1 after recovery", ip.notified())
	}
}

// TestBadInput: each malformed request gets one clear error and the
// helper keeps serving (on the same connection where the stream is still
// in step, on a new one after an oversized line).
func TestBadInput(t *testing.T) {
	ip := startInProcess(t, true, Options{MaxRequest: 4096})
	list := `{"v":1,"id":"ok","cmd":"sessions.list"}` + "\n"
	// A spawn's args up to the fields the cases get wrong.
	adhoc := `"team":"adhoc","team_id":"` + config.AdhocTeamID.String() + `","id":"0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c","mode":"spawn","role":"command",`
	tests := []struct {
		name     string
		line     string
		wantCode string
		wantText string
	}{
		{"malformed json", "{not json}\n", api.CodeBadRequest, "malformed request"},
		{"not an object", "42\n", api.CodeBadRequest, "malformed request"},
		{"wrong version", `{"v":9,"id":"1","cmd":"sessions.list"}` + "\n", api.CodeUnsupportedVersion, "protocol version 9"},
		{"unknown command", `{"v":1,"id":"1","cmd":"sessions.destroy"}` + "\n", api.CodeUnknownCommand, `unknown command "sessions.destroy"`},
		{"bad args type", `{"v":1,"id":"1","cmd":"sessions.status","args":{"name":7}}` + "\n", api.CodeBadRequest, `field "name"`},
		{"name with slash", `{"v":1,"id":"1","cmd":"sessions.status","args":{"name":"a/b"}}` + "\n", api.CodeBadRequest, "contains '/'"},
		{"name dotdot", `{"v":1,"id":"1","cmd":"sessions.logs","args":{"name":".."}}` + "\n", api.CodeBadRequest, "'..'"},
		{"name dotdot inside", `{"v":1,"id":"1","cmd":"attach","args":{"name":"x/../y"}}` + "\n", api.CodeBadRequest, "session name"},
		{"name control", `{"v":1,"id":"1","cmd":"send","args":{"name":"a\u001bb","text":"x"}}` + "\n", api.CodeBadRequest, "control"},
		{"kill slash", `{"v":1,"id":"1","cmd":"sessions.kill","args":{"name":"/etc"}}` + "\n", api.CodeBadRequest, "contains '/'"},
		{"spawn dotdot", `{"v":1,"id":"1","cmd":"spawn","args":{` + adhoc + `"name":"..up","cwd":"/","argv":["/bin/true"]}}` + "\n", api.CodeBadRequest, "'..'"},
		{"spawn relative program", `{"v":1,"id":"1","cmd":"spawn","args":{` + adhoc + `"name":"x","cwd":"/","argv":["./true"]}}` + "\n", api.CodeBadRequest, "field argv: program \"./true\" is a relative path"},
		{"spawn no argv", `{"v":1,"id":"1","cmd":"spawn","args":{` + adhoc + `"name":"x","cwd":"/"}}` + "\n", api.CodeBadRequest, "field argv: empty"},
		{"spawn without a cooldown", `{"v":1,"id":"1","cmd":"spawn","args":{` + adhoc + `"name":"x","cwd":"/","argv":["/bin/true"]}}` + "\n", api.CodeBadRequest, "field cooldown: missing"},
		{"unknown session", `{"v":1,"id":"1","cmd":"sessions.status","args":{"name":"nobody"}}` + "\n", api.CodeNotFound, `no session named "nobody"`},
		{"reset of an unknown session", `{"v":1,"id":"1","cmd":"sessions.reset","args":{"name":"nobody"}}` + "\n", api.CodeNotFound, `no session named "nobody"`},
		{"state is the CLI's", `{"v":1,"id":"1","cmd":"state","args":{"team":"x"}}` + "\n", api.CodeUnknownCommand, `unknown command "state"`},
		{"dispatch is the CLI's", `{"v":1,"id":"1","cmd":"dispatch","args":{"team":"x","issue":"X-1","mode":"plan"}}` + "\n", api.CodeUnknownCommand, `unknown command "dispatch"`},
	}
	r := dialRaw(t, ip.socket)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.roundTrip(t, tt.line)
			if resp.OK || resp.Error == nil || resp.Error.Code != tt.wantCode || !strings.Contains(resp.Error.Message, tt.wantText) {
				t.Errorf("%q → %+v (error %+v); want code %s with %q", tt.line, resp, resp.Error, tt.wantCode, tt.wantText)
			}
			if ok := r.roundTrip(t, list); !ok.OK || ok.ID != "ok" {
				t.Errorf("list after %s = %+v; want ok on the same connection", tt.name, ok)
			}
		})
	}

	t.Run("oversized", func(t *testing.T) {
		r := dialRaw(t, ip.socket)
		big := `{"v":1,"id":"big","cmd":"send","args":{"name":"x","text":"` + strings.Repeat("a", 10000) + `"}}` + "\n"
		r.c.Write([]byte(big)) // the helper may close before reading it all
		resp := r.read(t)
		if resp.Error == nil || resp.Error.Code != api.CodeTooLarge || !strings.Contains(resp.Error.Message, "4096") {
			t.Errorf("oversized request → %+v; want too_large naming the limit", resp.Error)
		}
		r.c.SetReadDeadline(time.Now().Add(waitFor))
		if _, err := r.br.ReadByte(); err == nil {
			t.Errorf("connection still open after too_large; want it closed")
		}
		r2 := dialRaw(t, ip.socket)
		if ok := r2.roundTrip(t, list); !ok.OK {
			t.Errorf("list on a new connection after too_large = %+v; want ok", ok)
		}
	})
}

// TestOtherUIDRefused: a peer whose UID (SO_PEERCRED) is not the served
// one gets unauthorized and is disconnected, while the allowed UID is
// still served. The helper here serves uid 4242; the test, as root, is
// the intruder, and the real CLI run as uid 4242 the legitimate client.
func TestOtherUIDRefused(t *testing.T) {
	sdtest.Start(t)
	uid := 4242
	dir := shortTempDir(t)
	sockDir := filepath.Join(dir, "legion")
	if err := os.Mkdir(sockDir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, api.SocketName)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sock, uid, uid); err != nil {
		t.Fatal(err)
	}
	ip := startInProcessOn(t, l, Options{PeerUID: &uid})

	r := dialRaw(t, sock)
	resp := r.read(t)
	if resp.Error == nil || resp.Error.Code != api.CodeUnauthorized || !strings.Contains(resp.Error.Message, "uid 0 may not use this helper") {
		t.Errorf("root peer → %+v; want unauthorized naming uid 0", resp.Error)
	}
	r.c.SetReadDeadline(time.Now().Add(waitFor))
	if _, err := r.br.ReadByte(); err == nil {
		t.Errorf("connection of a refused peer still open; want it closed")
	}

	// The allowed user, through the real CLI.
	bin := filepath.Join(dir, "legion-cli")
	src, err := os.ReadFile(sdtest.LegionBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "sessions", "list", "--json")
	cmd.Env = []string{"XDG_RUNTIME_DIR=" + dir, "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("legion sessions list as uid %d: %v\n%s", uid, err, stderr)
	}
	var lr api.ListResult
	if err := json.Unmarshal(out, &lr); err != nil || lr.DaemonID != ip.h.DaemonID() {
		t.Errorf("list as uid %d = %s, %v; want the helper's answer (daemon id %s)", uid, out, err, ip.h.DaemonID())
	}
}

// TestIdleExit: with helper.idle_exit set, the socket-activated helper
// exits once no client is connected for that long (a clean exit: the unit
// goes inactive, not failed), and the next command starts it again with
// every session recovered.
func TestIdleExit(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "legion.toml")
	if err := os.WriteFile(cfg, []byte("[helper]\nidle_exit = \"300ms\"\nlog_level = \"debug\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.spawn(ctx, "idler", "/bin/sh", "-c", "sleep 1000")
	waitIdle := func() {
		e.poll(ctx, "the helper's idle exit", func() (bool, string) {
			st, err := e.mgr.State(ctx, "legion.service")
			if err != nil {
				return false, err.Error()
			}
			return st.ActiveState == "inactive" && st.MainPID == 0, st.ActiveState + "/" + st.SubState + " result " + st.Result
		})
	}
	waitIdle()
	st, err := e.mgr.State(ctx, "legion.service")
	if err != nil || st.Result != "success" {
		t.Errorf("helper unit after idle exit: %+v, %v; want result success", st, err)
	}
	r := e.list(ctx)
	if len(r.Sessions) != 1 || r.Sessions[0].State != api.StateRunning || r.Recovery.Recovered != 1 {
		t.Errorf("list after idle exit = %+v; want the session recovered and running", r)
	}
	waitIdle() // and again, after serving
}

// TestSessionLifecycleInProcess runs spawn, send, logs (with a follower
// that must end by itself), attach and kill against a helper in this
// process, so the race detector sees the handlers.
func TestSessionLifecycleInProcess(t *testing.T) {
	ip := startInProcess(t, true, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := ip.client(t)
	res, err := c.Spawn(ctx, testLaunch("life", "/bin/sh", "-c", echoScript))
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	if res.Name != "life" || res.Unit != mustUnit(t, "life") {
		t.Errorf("Spawn = %+v; want name life and unit %s", res, mustUnit(t, "life"))
	}
	if _, err := c.Spawn(ctx, testLaunch("life", "/bin/true")); !errors.Is(err, api.ErrExists) {
		t.Errorf("second Spawn of the same name = %v; want exists", err)
	}

	follow := make(chan string, 1)
	go func() {
		fc, err := api.DialPath(context.Background(), ip.socket)
		if err != nil {
			follow <- err.Error()
			return
		}
		defer fc.Close()
		var b strings.Builder
		r, err := fc.Logs(context.Background(), api.LogsArgs{Name: "life", Follow: true}, &b)
		follow <- b.String() + "|" + r.Reason + "|" + fmt.Sprint(err)
	}()

	if _, err := c.Send(ctx, "life", "ping", false); err != nil {
		t.Fatalf("Send: %v", err)
	}
	waitfor.Check(t, waitFor, "the transcript to show got:ping", func() error {
		var b strings.Builder
		if _, err := c.Logs(ctx, api.LogsArgs{Name: "life"}, &b); err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if !strings.Contains(b.String(), "got:ping") {
			return fmt.Errorf("transcript: %q", b.String())
		}
		return nil
	})

	conn, ar, err := c.Attach(ctx, api.AttachArgs{Name: "life"})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if ar.Session.State != api.StateRunning {
		t.Errorf("Attach result state %s; want running", ar.Session.State)
	}
	wc := proto.NewClient(conn)
	zero := uint64(0)
	if _, err := wc.Attach(ctx, proto.AttachParams{Offset: &zero}); err != nil {
		t.Fatalf("worker attach: %v", err)
	}
	if err := wc.SendInput([]byte("typed\r")); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	for !strings.Contains(string(seen), "got:typed") {
		select {
		case ev, ok := <-wc.Events():
			if !ok {
				t.Fatalf("attach ended: %v", wc.Err())
			}
			seen = append(seen, ev.Data...)
		case <-ctx.Done():
			t.Fatalf("attached output never showed got:typed: %q", seen)
		}
	}
	wc.Close()

	s, err := c.Kill(ctx, "life")
	if err != nil || s.State != api.StateExited || s.Exit == nil {
		t.Errorf("Kill = %+v, %v; want exited with exit info", s, err)
	}
	select {
	case got := <-follow:
		if !strings.Contains(got, "got:ping") || !strings.Contains(got, "|session ended|<nil>") {
			t.Errorf("follower = %q; want the transcript, then the end of the session", got)
		}
	case <-ctx.Done():
		t.Fatal("follower did not end after the session ended")
	}
	if _, err := c.Send(ctx, "life", "x", false); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("Send to a killed session = %v; want not_running", err)
	}
}
