package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// termWait bounds every wait of these tests: a loaded machine starts a
// unit and an agent slowly.
const termWait = 2 * time.Minute

// testToken is the dashboard token of these tests.
const testToken = "0123456789abcdef0123456789abcdef-webterm"

// helperFixture is a real helper (`legion helper`, the built binary)
// under a private systemd user manager, and the dashboard's Server run in
// front of it on a loopback port.
type helperFixture struct {
	m    *sdtest.Manager
	bin  string // the legion binary (helper, scripted agent)
	sock string // the helper's socket (the default one, as the event hub dials it)
	url  string // the dashboard: http://127.0.0.1:PORT
	cfg  string // the legion.toml the dashboard reads
	c    *api.Client
}

// startHelper starts a private manager, `legion helper` on its default
// socket, and a dashboard Server (its event hub included) on a loopback
// port. Cleanup stops them all.
func startHelper(t *testing.T) *helperFixture {
	t.Helper()
	m := sdtest.Start(t)
	sock, err := api.SocketPath()
	if err != nil {
		t.Fatal(err)
	}
	f := &helperFixture{m: m, bin: sdtest.LegionBinary(t), sock: sock, cfg: filepath.Join(m.Home, ".config", "legion", "legion.toml")}
	var stderr bytes.Buffer
	cmd := exec.Command(f.bin, "helper", "--log-level", "debug")
	cmd.Env, cmd.Stderr = m.Env, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(termWait):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("helper's log:\n%s", stderr.String())
		}
	})
	waitfor.Check(t, termWait, "legion helper to listen on "+f.sock, func() error {
		select {
		case err := <-exited:
			t.Fatalf("legion helper ended before it listened: %v\n%s", err, stderr.String())
		default:
		}
		c, err := net.Dial("unix", f.sock)
		if err == nil {
			c.Close()
		}
		return err
	})
	c, err := api.DialPath(t.Context(), f.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.c = c

	s, err := New(Options{Token: testToken, HelperSocket: f.sock, ConfigPath: f.cfg})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "http://" + l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, []net.Listener{l}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Server.Run = %v; want nil at its end", err)
		}
	})
	return f
}

// spawn starts a `legion spawn`-like session of the ad hoc team running
// argv, and waits until it runs.
func (f *helperFixture) spawn(t *testing.T, name string, env []string, argv ...string) api.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), termWait)
	defer cancel()
	_, err := f.c.Spawn(ctx, api.SpawnArgs{
		Team: config.AdhocTeam, TeamID: config.AdhocTeamID.String(),
		Name: name, ID: uuid.NewSHA1(config.AdhocTeamID, []byte(name+":"+api.ModeSpawn)).String(),
		Mode: api.ModeSpawn, Role: "command", Cwd: f.m.Home, Argv: argv, Env: env,
		Cooldown:           new(api.Duration(0)),
		StartLimitBurst:    5,
		StartLimitInterval: api.Duration(10 * time.Minute),
		RingSize:           1 << 20,
	})
	if err != nil {
		t.Fatalf("spawn %s: %v", name, err)
	}
	var s api.Session
	waitfor.Check(t, termWait, name+" to run", func() error {
		s, err = f.c.Status(ctx, name)
		if err != nil {
			return err
		}
		if s.State != api.StateRunning {
			return fmt.Errorf("state %s", s.State)
		}
		return nil
	})
	return s
}

// agent starts the scripted agent (Claude Code's stand-in) as session
// name with the prompt "hello"; at its prompt it answers each line typed
// with "Got it: LINE".
func (f *helperFixture) agent(t *testing.T, name string) api.Session {
	t.Helper()
	return f.spawn(t, name, []string{"LEGION_SCRIPT=say Got it: $PROMPT"}, f.bin, "scripted-agent", "hello")
}

// get does GET path with the token and decodes the JSON answer into out
// (when not nil); it returns the status code and the error message of an
// error answer.
func (f *helperFixture) get(t *testing.T, path string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
			t.Fatalf("GET %s = %d with %q; want an {\"error\": ...} body", path, resp.StatusCode, body)
		}
		return resp.StatusCode, e.Error
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: decode %q: %v", path, body, err)
		}
	}
	return resp.StatusCode, ""
}

// transcript is the session's whole transcript as the helper has it.
func (f *helperFixture) transcript(t *testing.T, name string) string {
	t.Helper()
	var b strings.Builder
	if _, err := f.c.Logs(t.Context(), api.LogsArgs{Name: name}, &b); err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return b.String()
}

// TestSessionEndpoints: the detail, transcript and journal of a session
// of the scripted agent under the real helper, and the errors for an
// unknown session, a bad name and bad parameters.
func TestSessionEndpoints(t *testing.T) {
	f := startHelper(t)
	want := f.agent(t, "detail")

	var d sessionDetail
	if code, msg := f.get(t, "/api/sessions/detail", &d); code != http.StatusOK {
		t.Fatalf("GET /api/sessions/detail = %d %s", code, msg)
	}
	s := d.Session
	if s.Name != "detail" || s.Unit != want.Unit || s.State != api.StateRunning || s.PID == 0 || s.Resources == nil {
		t.Errorf("detail = %+v; want detail, unit %s, running, a PID and resources", s, want.Unit)
	} else if (s.Resources.MemoryBytes == nil || s.Resources.CPUNSec == nil) && s.Resources.NotAccounted == "" {
		t.Errorf("resources = %+v; want memory and CPU, or why not", *s.Resources)
	}

	t.Run("transcript", func(t *testing.T) {
		var tr transcriptChunk
		waitfor.Check(t, termWait, "the transcript to show the agent's answer", func() error {
			f.get(t, "/api/sessions/detail/transcript", &tr)
			if !strings.Contains(tr.Data, "Got it: hello") {
				return fmt.Errorf("transcript %q", tr.Data)
			}
			return nil
		})
		if tr.Offset != 0 || tr.Next != int64(len(tr.Data)) || tr.Truncated {
			t.Errorf("transcript = offset %d next %d (%d bytes) truncated %v; want all of it from 0", tr.Offset, tr.Next, len(tr.Data), tr.Truncated)
		}
		var rest transcriptChunk
		f.get(t, fmt.Sprintf("/api/sessions/detail/transcript?offset=%d", tr.Next), &rest)
		if rest.Offset != tr.Next || rest.Next < tr.Next {
			t.Errorf("transcript from %d = %+v; want what follows it", tr.Next, rest)
		}
		var part transcriptChunk
		f.get(t, "/api/sessions/detail/transcript?offset=3", &part)
		if part.Offset != 3 || !strings.HasPrefix(tr.Data[3:], part.Data[:min(len(part.Data), len(tr.Data)-3)]) {
			t.Errorf("transcript from 3 = %+v; want the transcript from its fourth byte", part)
		}
	})

	t.Run("long transcript", func(t *testing.T) {
		// More than the default tail: the answer is its last bytes, with
		// the whole's offsets, and says there is more before.
		f.spawn(t, "long", nil, "/bin/sh", "-c", "seq -f 'line %06g' 0 29999; echo DONE; exec sleep 100000")
		var full string
		waitfor.Check(t, termWait, "the long transcript to end with DONE", func() error {
			if full = f.transcript(t, "long"); !strings.Contains(full, "DONE\r\n") {
				return fmt.Errorf("%d bytes so far", len(full))
			}
			return nil
		})
		var tr transcriptChunk
		f.get(t, "/api/sessions/long/transcript", &tr)
		if len(full) <= defaultTranscriptTail || tr.Data != full[len(full)-defaultTranscriptTail:] ||
			tr.Offset != int64(len(full)-defaultTranscriptTail) || tr.Next != int64(len(full)) || !tr.Truncated {
			t.Errorf("transcript = offset %d next %d (%d bytes) truncated %v; want the last %d of %d bytes, truncated", tr.Offset, tr.Next, len(tr.Data), tr.Truncated, defaultTranscriptTail, len(full))
		}
	})

	t.Run("journal", func(t *testing.T) {
		var j journalLines
		code, msg := f.get(t, "/api/sessions/detail/journal?lines=50", &j)
		switch code {
		case http.StatusOK:
			if j.Unit != want.Unit {
				t.Errorf("journal unit = %q; want %s", j.Unit, want.Unit)
			}
			for _, e := range j.Entries {
				if e.About != want.Unit {
					t.Errorf("journal entry %+v is not about %s", e, want.Unit)
				}
			}
		case http.StatusServiceUnavailable:
			// No journald here (a container): the answer says so and
			// names the unit.
			if !strings.Contains(msg, want.Unit) || !strings.Contains(msg, "journal") {
				t.Errorf("journal without journald = %q; want the unit and why", msg)
			}
			t.Logf("no journald on this machine: %s", msg)
		default:
			t.Errorf("GET journal = %d %s; want 200, or 503 without journald", code, msg)
		}
	})

	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/api/sessions/nosuch", http.StatusNotFound, "nosuch"},
		{"/api/sessions/nosuch/transcript", http.StatusNotFound, "nosuch"},
		{"/api/sessions/nosuch/journal", http.StatusNotFound, "nosuch"},
		{"/api/sessions/-x", http.StatusBadRequest, "starts with '-'"},
		{"/api/sessions/detail/transcript?offset=-1", http.StatusBadRequest, "offset"},
		{"/api/sessions/detail/journal?lines=0", http.StatusBadRequest, "lines"},
		{"/api/sessions/detail/journal?lines=x", http.StatusBadRequest, "lines"},
		{"/api/sessions/detail/journal?after=--lines%3D9", http.StatusBadRequest, "cursor"},
		{"/api/sessions/detail/journal?after=s%3D1%3Bi%3Dzz", http.StatusBadRequest, "cursor"},
	} {
		if code, msg := f.get(t, tc.path, nil); code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("GET %s = %d %q; want %d naming %q", tc.path, code, msg, tc.code, tc.want)
		}
	}
}

// termClient is a page's end of the terminal WebSocket.
type termClient struct {
	t      *testing.T
	ws     *websocket.Conn
	screen strings.Builder // every output byte received, snapshots included
	msgs   []map[string]any
}

// dialTerm opens the terminal of session name as a page of the dashboard
// would (its Origin, the token).
func (f *helperFixture) dialTerm(t *testing.T, name string) *termClient {
	t.Helper()
	h := http.Header{}
	h.Set("Origin", f.url)
	h.Set("Authorization", "Bearer "+testToken)
	u := "ws" + strings.TrimPrefix(f.url, "http") + "/api/sessions/" + name + "/term"
	ws, _, err := websocket.Dial(t.Context(), u, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	ws.SetReadLimit(8 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &termClient{t: t, ws: ws}
}

func (c *termClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.ws.Write(c.t.Context(), websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", b, err)
	}
}

// until reads messages until cond holds; it fails the test when the
// connection ends first or the wait runs out.
func (c *termClient) until(what string, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), termWait)
	defer cancel()
	for !cond() {
		typ, p, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatalf("waiting for %s: %v; screen so far %q, messages %v", what, err, c.screen.String(), c.msgs)
		}
		if typ == websocket.MessageBinary {
			if len(p) == 0 || p[0] != 'S' && p[0] != 'D' {
				c.t.Fatalf("output message %q: want a leading S or D", p)
			}
			c.screen.Write(p[1:])
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			c.t.Fatalf("server message %q: %v", p, err)
		}
		c.msgs = append(c.msgs, m)
	}
}

func (c *termClient) got(typ string) bool {
	for _, m := range c.msgs {
		if m["type"] == typ {
			return true
		}
	}
	return false
}

func (c *termClient) shows(text string) func() bool {
	return func() bool { return strings.Contains(c.screen.String(), text) }
}

// TestTerm: the terminal shows the agent's screen (the snapshot, then the
// stream); keys typed before "control" are not delivered (the agent never
// sees them), keys after it are, and so is a resize.
func TestTerm(t *testing.T) {
	f := startHelper(t)
	f.agent(t, "term")
	waitfor.Check(t, termWait, "the agent's first answer", func() error {
		if !strings.Contains(f.transcript(t, "term"), "Got it: hello") {
			return errors.New("not yet")
		}
		return nil
	})

	c := f.dialTerm(t, "term")
	c.until("the attach and the screen with the agent's answer", func() bool { return c.got("attached") && c.shows("Got it: hello")() })
	if m := c.msgs[0]; m["type"] != "attached" || m["control"] != false || m["cols"] == nil {
		t.Errorf("first message = %v; want attached, read-only, with the PTY's size", m)
	}

	c.send(termMessage{Type: "input", Data: "before\r"})
	c.until("the read-only refusal", func() bool { return c.got("error") })
	c.send(termMessage{Type: "resize", Cols: 111, Rows: 33}) // ignored: read-only
	c.send(termMessage{Type: "control"})
	c.until("control", func() bool { return c.got("control") })
	c.send(termMessage{Type: "resize", Cols: 100, Rows: 30})
	c.send(termMessage{Type: "input", Data: "after\r"})
	c.until("the agent's answer to the typed line", c.shows("Got it: after"))
	// Taking control attached again from the page's offset: nothing the
	// page had was sent twice.
	if n := strings.Count(c.screen.String(), "Got it: hello"); n != 1 {
		t.Errorf("the page got the first answer %d times; want once:\n%q", n, c.screen.String())
	}

	// The worker's side: the agent got "after" and never "before" (input
	// is delivered in order, so "before" would have come first).
	var tr string
	waitfor.Check(t, termWait, "the transcript to show the answer to after", func() error {
		if tr = f.transcript(t, "term"); !strings.Contains(tr, "Got it: after") {
			return fmt.Errorf("transcript %q", tr)
		}
		return nil
	})
	if strings.Contains(tr, "before") {
		t.Errorf("transcript = %q; want no trace of before", tr)
	}
	// The PTY has the page's size, as another attach sees it.
	conn, _, err := f.c.Attach(t.Context(), api.AttachArgs{Name: "term", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	wc := proto.NewClient(conn)
	defer wc.Close()
	ar, err := wc.Attach(t.Context(), proto.AttachParams{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if ar.Cols != 100 || ar.Rows != 30 {
		t.Errorf("PTY size after the page's resize = %dx%d; want 100x30", ar.Cols, ar.Rows)
	}
}

// TestTermFollowsRestart: when the agent exits and systemd starts it
// again, the page is told the exit and gets the new run's screen on the
// same connection, still in control; when the session ends for good, the
// page is told and the connection closes normally.
func TestTermFollowsRestart(t *testing.T) {
	f := startHelper(t)
	f.spawn(t, "restart", nil, "/bin/sh", "-c", `echo "run:$$ ready"; read line; echo "got:$line"; exit 3`)
	c := f.dialTerm(t, "restart")
	c.until("the first run's screen", c.shows("ready"))
	c.send(termMessage{Type: "control"})
	c.until("control", func() bool { return c.got("control") })
	c.send(termMessage{Type: "input", Data: "one\r"})
	c.until("the exit of the first run", func() bool { return c.shows("got:one")() && c.got("exit") })
	attaches := func() int {
		n := 0
		for _, m := range c.msgs {
			if m["type"] == "attached" {
				n++
			}
		}
		return n
	}
	c.until("the second run's attach", func() bool { return attaches() == 2 })
	for _, m := range c.msgs {
		if m["type"] == "exit" && m["code"] != float64(3) {
			t.Errorf("exit message %v; want code 3", m)
		}
	}
	c.send(termMessage{Type: "input", Data: "two\r"})
	c.until("the second run's answer", c.shows("got:two"))

	if _, err := f.c.Kill(t.Context(), "restart"); err != nil {
		t.Fatal(err)
	}
	c.until("the end", func() bool { return c.got("ended") })
	_, _, err := c.ws.Read(t.Context())
	if s := websocket.CloseStatus(err); s != websocket.StatusNormalClosure {
		t.Errorf("after the end: read = %v; want a normal closure", err)
	}
}

// TestTermBadInput: a message that is not JSON, of an unknown type,
// binary, oversize, or a resize out of range closes that connection with
// a status and a reason saying what was wrong; the session, its worker and
// the helper go on (a new connection attaches as before).
func TestTermBadInput(t *testing.T) {
	f := startHelper(t)
	f.agent(t, "bad")
	for _, tc := range []struct {
		name   string
		typ    websocket.MessageType
		msg    []byte
		status websocket.StatusCode
		reason string
	}{
		{"malformed JSON", websocket.MessageText, []byte(`{"type":`), websocket.StatusInvalidFramePayloadData, "malformed JSON"},
		{"unknown type", websocket.MessageText, []byte(`{"type":"rm -rf"}`), websocket.StatusPolicyViolation, `unknown message type "rm -rf"`},
		{"binary", websocket.MessageBinary, []byte("keys"), websocket.StatusUnsupportedData, "binary messages"},
		{"oversize", websocket.MessageText, []byte(`{"type":"input","data":"` + strings.Repeat("x", ReadLimit) + `"}`), websocket.StatusMessageTooBig, "read limited"},
		{"resize out of range", websocket.MessageText, []byte(`{"type":"resize","cols":0,"rows":100000}`), websocket.StatusPolicyViolation, "want cols and rows from 2 to 1000"},
		{"input without data", websocket.MessageText, []byte(`{"type":"input"}`), websocket.StatusPolicyViolation, "without"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.dialTerm(t, "bad")
			c.until("the attach", func() bool { return c.got("attached") })
			if err := c.ws.Write(t.Context(), tc.typ, tc.msg); err != nil {
				t.Fatalf("write: %v", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), termWait)
			defer cancel()
			var err error
			for err == nil {
				_, _, err = c.ws.Read(ctx)
			}
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != tc.status || !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("connection ended with %v; want close status %v with a reason saying %q", err, tc.status, tc.reason)
			}
			s, err := f.c.Status(t.Context(), "bad")
			if err != nil || s.State != api.StateRunning {
				t.Errorf("session after the bad message: %+v, %v; want it running", s, err)
			}
		})
	}
	c := f.dialTerm(t, "bad")
	c.until("a new attach after the bad messages", func() bool { return c.got("attached") && c.shows("Got it: hello")() })
}

// TestTermRefusals: a terminal of an unknown session closes with the
// reason; without the token the upgrade is refused with 401, from another
// site's page with 403.
func TestTermRefusals(t *testing.T) {
	f := startHelper(t)
	c := f.dialTerm(t, "nosuch")
	_, _, err := c.ws.Read(t.Context())
	var ce websocket.CloseError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "no session nosuch") {
		t.Errorf("terminal of an unknown session: %v; want a close saying there is no such session", err)
	}
	u := "ws" + strings.TrimPrefix(f.url, "http") + "/api/sessions/x/term"
	for _, tc := range []struct {
		name   string
		header http.Header
		code   int
	}{
		{"no token", http.Header{"Origin": {f.url}}, http.StatusUnauthorized},
		{"other origin", http.Header{"Origin": {"http://evil.example"}, "Authorization": {"Bearer " + testToken}}, http.StatusForbidden},
	} {
		_, resp, err := websocket.Dial(t.Context(), u, &websocket.DialOptions{HTTPHeader: tc.header})
		if err == nil || resp == nil || resp.StatusCode != tc.code {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			t.Errorf("%s: dial = %v (status %d); want %d", tc.name, err, code, tc.code)
		}
	}
}
