package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/legion-dev/legion/dashboard"
)

const testToken = "0123456789abcdef0123456789abcdef-test"

// newServer serves a dashboard with testToken from an httptest server. Its
// legion.toml does not exist (no teams); no helper runs.
func newServer(t *testing.T) (*dashboard.Server, *httptest.Server) {
	t.Helper()
	s, err := dashboard.New(dashboard.Options{Token: testToken, ConfigPath: filepath.Join(t.TempDir(), "legion.toml")})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func request(t *testing.T, method, url string, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAuth: every API route but the login needs the token; the login
// takes it only from a same-origin POST and answers with an HttpOnly,
// SameSite=Strict cookie; requests that change something or open a
// WebSocket from another origin are refused.
func TestAuth(t *testing.T) {
	_, ts := newServer(t)
	u := ts.URL
	host := strings.TrimPrefix(u, "http://")
	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		hdr      map[string]string
		code     int
		contains string
	}{
		{"no token", "GET", "/api/teams", "", nil, 401, "not logged in"},
		{"wrong bearer token", "GET", "/api/teams", "", map[string]string{"Authorization": "Bearer wrong"}, 401, "not logged in"},
		{"wrong cookie", "GET", "/api/teams", "", map[string]string{"Cookie": dashboard.CookieName + "=" + strings.Repeat("x", len(testToken))}, 401, "not logged in"},
		{"no token, events", "GET", "/api/events", "", nil, 401, "not logged in"},
		{"no token, unknown API route", "GET", "/api/nothing", "", nil, 401, "not logged in"},
		{"bearer token", "GET", "/api/teams", "", map[string]string{"Authorization": "Bearer " + testToken}, 200, `"teams"`},
		{"cookie", "GET", "/api/whoami", "", map[string]string{"Cookie": dashboard.CookieName + "=" + testToken}, 200, "ok"},
		{"unknown API route", "GET", "/api/nothing", "", map[string]string{"Authorization": "Bearer " + testToken}, 404, "no API route GET /api/nothing"},
		{"app shell without token", "GET", "/", "", nil, 200, "<!doctype html>"},
		{"login page", "GET", "/login", "", nil, 200, "app.js"},
		{"static", "GET", "/static/app.js", "", nil, 200, "registerView"},
		{"vendored xterm licence", "GET", "/static/vendor/xterm/LICENSE", "", nil, 200, "MIT"},
		{"login wrong token", "POST", "/api/login", `{"token":"wrong"}`, map[string]string{"Origin": u}, 401, "wrong token"},
		{"login bad JSON", "POST", "/api/login", `{"token":`, map[string]string{"Origin": u}, 400, "decode the JSON body"},
		{"login unknown field", "POST", "/api/login", `{"token":"x","admin":true}`, map[string]string{"Origin": u}, 400, "unknown"},
		{"login cross-site", "POST", "/api/login", `{"token":"` + testToken + `"}`, map[string]string{"Origin": "http://evil.example"}, 403, "cross-site request refused: Origin http://evil.example"},
		{"login cross-site by Sec-Fetch-Site", "POST", "/api/login", `{"token":"` + testToken + `"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross-site"},
		{"login null origin", "POST", "/api/login", `{"token":"` + testToken + `"}`, map[string]string{"Origin": "null"}, 403, "cross-site"},
		{"logout cross-site", "POST", "/api/logout", "", map[string]string{"Origin": "http://" + host + ".evil.example", "Authorization": "Bearer " + testToken}, 403, "cross-site"},
		{"websocket cross-site", "GET", "/api/events", "", map[string]string{
			"Origin": "http://evil.example", "Upgrade": "websocket", "Connection": "Upgrade",
			"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Cookie": dashboard.CookieName + "=" + testToken,
		}, 403, "cross-site request refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := request(t, tt.method, u+tt.path, tt.body, tt.hdr)
			if resp.StatusCode != tt.code || !strings.Contains(body, tt.contains) {
				t.Errorf("%s %s = %d %q; want %d containing %q", tt.method, tt.path, resp.StatusCode, body, tt.code, tt.contains)
			}
			if resp.StatusCode >= 400 && !strings.HasPrefix(body, `{"error":`) {
				t.Errorf("%s %s: error body %q; want {\"error\": ...}", tt.method, tt.path, body)
			}
			if strings.Contains(body, testToken) {
				t.Errorf("%s %s: the response holds the token", tt.method, tt.path)
			}
		})
	}

	t.Run("login sets a strict HttpOnly cookie", func(t *testing.T) {
		resp, body := request(t, "POST", u+"/api/login", `{"token":"`+testToken+`"}`, map[string]string{"Origin": u, "Content-Type": "application/json"})
		if resp.StatusCode != 200 {
			t.Fatalf("login = %d %s; want 200", resp.StatusCode, body)
		}
		cs := resp.Cookies()
		if len(cs) != 1 || cs[0].Name != dashboard.CookieName || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" {
			t.Fatalf("login cookies = %+v; want one HttpOnly SameSite=Strict %s for /", cs, dashboard.CookieName)
		}
		resp, body = request(t, "GET", u+"/api/teams", "", map[string]string{"Cookie": cs[0].Name + "=" + cs[0].Value})
		if resp.StatusCode != 200 {
			t.Errorf("with the login's cookie GET /api/teams = %d %s; want 200", resp.StatusCode, body)
		}
	})
}

// dialEvents opens /api/events with the token.
func dialEvents(t *testing.T, ctx context.Context, url string) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/api/events", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}},
	})
	if err != nil {
		t.Fatalf("dial /api/events: %v (%v)", err, resp)
	}
	return c
}

// readHello reads the first event of c, which must be hello.
func readHello(t *testing.T, ctx context.Context, c *websocket.Conn) {
	t.Helper()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read hello: %v", err)
	}
	var ev dashboard.Event
	if err := json.Unmarshal(b, &ev); err != nil || ev.Type != "hello" {
		t.Fatalf("first event %s (%v); want type hello", b, err)
	}
}

// TestEventsBadInput: an oversize message and malformed frames close
// that connection with a close frame that says why; the server goes on
// serving other pages and requests.
func TestEventsBadInput(t *testing.T) {
	s, ts := newServer(t)
	ctx := t.Context()
	other := dialEvents(t, ctx, ts.URL)
	defer other.CloseNow()
	readHello(t, ctx, other)

	t.Run("oversize message", func(t *testing.T) {
		c := dialEvents(t, ctx, ts.URL)
		defer c.CloseNow()
		readHello(t, ctx, c)
		if err := c.Write(ctx, websocket.MessageText, bytes.Repeat([]byte("x"), dashboard.ReadLimit+1)); err != nil {
			t.Fatalf("write: %v", err)
		}
		_, _, err := c.Read(ctx)
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusMessageTooBig || !strings.Contains(ce.Reason, "read limited at") {
			t.Fatalf("after an oversize message Read = %v; want a close with status %v and a reason", err, websocket.StatusMessageTooBig)
		}
		t.Logf("closed: %v", ce)
	})

	malformed := []struct {
		name  string
		frame []byte
	}{
		// A client frame must be masked (RFC 6455 5.1).
		{"unmasked frame", []byte{0x81, 0x02, 'h', 'i'}},
		// RSV1 without an extension that defines it (5.2).
		{"reserved bits", append([]byte{0xC1, 0x82}, 1, 2, 3, 4, 'h'^1, 'i'^2)},
		// Opcode 0x3 is reserved (5.2).
		{"reserved opcode", append([]byte{0x83, 0x80}, 1, 2, 3, 4)},
		// A control frame may not be fragmented (5.5).
		{"fragmented ping", append([]byte{0x09, 0x80}, 1, 2, 3, 4)},
		// A frame that announces far more than the limit: refused once
		// more than ReadLimit bytes of it came.
		{"huge length", append(append([]byte{0x82, 0xFF}, append(binary.BigEndian.AppendUint64(nil, 1<<40), 0, 0, 0, 0)...), make([]byte, dashboard.ReadLimit+1)...)},
	}
	for _, m := range malformed {
		t.Run(m.name, func(t *testing.T) {
			conn, br := rawUpgrade(t, ts.URL)
			defer conn.Close()
			if _, err := conn.Write(m.frame); err != nil {
				t.Fatalf("write the frame: %v", err)
			}
			code, reason := readClose(t, br)
			if code != uint16(websocket.StatusProtocolError) && code != uint16(websocket.StatusMessageTooBig) {
				t.Errorf("close code %d (%q); want %d (protocol error) or %d (too big)", code, reason, websocket.StatusProtocolError, websocket.StatusMessageTooBig)
			}
			if reason == "" {
				t.Errorf("close frame without a reason (code %d)", code)
			}
			t.Logf("closed: %d %q", code, reason)
		})
	}

	// The server is unaffected: the first page still gets events, and
	// requests are answered.
	s.Publish(dashboard.Event{Type: "needs"})
	_, b, err := other.Read(ctx)
	if err != nil || !strings.Contains(string(b), `"needs"`) {
		t.Errorf("the other page after the bad input read %s, %v; want the needs event", b, err)
	}
	resp, body := request(t, "GET", ts.URL+"/api/whoami", "", map[string]string{"Authorization": "Bearer " + testToken})
	if resp.StatusCode != 200 {
		t.Errorf("GET /api/whoami after the bad input = %d %s", resp.StatusCode, body)
	}
}

// rawUpgrade opens /api/events by hand (for frames no client library
// would send) and returns the connection past the 101 response.
func rawUpgrade(t *testing.T, url string) (net.Conn, *bufio.Reader) {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	var key [16]byte
	rand.Read(key[:])
	req := "GET /api/events HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer " + testToken + "\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v; want 101", resp, err)
	}
	return conn, br
}

// readClose reads frames from the server until its close frame and
// returns the close's code and reason.
func readClose(t *testing.T, br *bufio.Reader) (uint16, string) {
	t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("read a frame header: %v; want a close frame", err)
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var l [2]byte
			io.ReadFull(br, l[:])
			n = uint64(binary.BigEndian.Uint16(l[:]))
		case 127:
			var l [8]byte
			io.ReadFull(br, l[:])
			n = binary.BigEndian.Uint64(l[:])
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatalf("read a frame: %v", err)
		}
		if h[0]&0x0f == 0x8 {
			if len(payload) < 2 {
				return 0, ""
			}
			return binary.BigEndian.Uint16(payload), string(payload[2:])
		}
	}
}

// TestLoadToken: made 0600 on first use, the same afterwards, one token
// when several first uses race, and refused when others may read it or
// it is too short.
func TestLoadToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, dashboard.TokenFile)
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Go(func() {
			tok, err := dashboard.LoadToken(path)
			if err != nil {
				t.Errorf("LoadToken: %v", err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range toks[1:] {
		if tok != toks[0] || len(tok) < 32 {
			t.Fatalf("LoadToken from 8 goroutines = %q; want one token of 32+ characters", toks)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %s: %v, %v; want mode 0600", path, fi, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("token dir %s: %v, %v; want mode 0700", dir, fi, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dashboard.LoadToken(path); err == nil || !strings.Contains(err.Error(), "others may read it") {
		t.Errorf("LoadToken of a 0644 file = %v; want an error saying others may read it", err)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dashboard.LoadToken(path); err == nil || !strings.Contains(err.Error(), "want at least 32 characters") {
		t.Errorf("LoadToken of a short token = %v; want an error", err)
	}
}

// FuzzLogin: whatever the body, the login never panics and never
// succeeds without the token.
func FuzzLogin(f *testing.F) {
	f.Add([]byte(`{"token":"x"}`))
	f.Add([]byte(`{"token":"` + testToken + `"}`))
	f.Add([]byte(`{"token":` + strings.Repeat("[", 1000)))
	f.Add([]byte("\x00\xff"))
	s, err := dashboard.New(dashboard.Options{Token: testToken})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "http://127.0.0.1/api/login", bytes.NewReader(body))
		req.Header.Set("Origin", "http://127.0.0.1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var in struct{ Token string }
		ok := json.Unmarshal(body, &in) == nil && in.Token == testToken
		if rec.Code == 200 && !ok {
			t.Errorf("login with %q = 200; want a refusal", body)
		}
		if rec.Code != 200 && !strings.HasPrefix(rec.Body.String(), `{"error":`) {
			t.Errorf("login with %q = %d %q; want a JSON error", body, rec.Code, rec.Body)
		}
	})
}
