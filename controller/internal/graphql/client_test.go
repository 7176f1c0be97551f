package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	testSecret = "sk_TESTSECRET0123456789"
	testHint   = "the key in $LEGION_TEST_KEY"
)

// reply is a canned answer of the fake server.
type reply struct {
	status int
	header http.Header
	body   string
	hangup bool // close the connection without answering
	cut    bool // promise 100 bytes of body, send 1, close the connection
}

// fake is a GraphQL endpoint on a local httptest server: it records every
// request and answers with the queued replies, then with data {"ok": true}.
type fake struct {
	*httptest.Server

	mu        sync.Mutex
	replies   []reply
	requests  []*http.Request
	bodies    [][]byte
	onRequest func() // called, without the lock, as each request arrives
}

func newFake(t *testing.T, replies ...reply) *fake {
	t.Helper()
	f := &fake{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	body := new(bytes.Buffer)
	if _, err := body.ReadFrom(r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, body.Bytes())
	rp := reply{status: http.StatusOK, body: `{"data":{"ok":true}}`}
	if len(f.replies) > 0 {
		rp, f.replies = f.replies[0], f.replies[1:]
	}
	hook := f.onRequest
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if rp.hangup || rp.cut {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		if rp.cut {
			conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"))
		}
		return
	}
	for k, v := range rp.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rp.status)
	w.Write([]byte(rp.body))
}

// request returns the i-th request and its body.
func (f *fake) request(i int) (*http.Request, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[i], f.bodies[i]
}

func (f *fake) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// newClient returns a client of the test service for f with tiny backoffs,
// logging into log.
func newClient(f *fake, log *bytes.Buffer) *Client[testError] {
	return New(testService, Options{
		Endpoint:      f.URL + "/graphql",
		Authorization: "Token " + testSecret,
		AuthHint:      testHint,
		Retry:         Retry{Attempts: 3, Min: time.Millisecond, Max: 4 * time.Millisecond},
		Logger:        slog.New(slog.NewJSONHandler(log, nil)),
	})
}

var (
	opRead  = Operation{Name: "Read", Query: "query Read($n: Int!) { ok }", Idempotent: true}
	opWrite = Operation{Name: "Write", Query: "mutation Write { ok }"}
)

// TestDoRequest: what goes on the wire, and what comes back into out.
func TestDoRequest(t *testing.T) {
	f := newFake(t, reply{status: 200, body: `{"data":{"ok":true,"n":3}}`})
	var out struct {
		OK bool `json:"ok"`
		N  int  `json:"n"`
	}
	if err := newClient(f, &bytes.Buffer{}).Do(t.Context(), opRead, map[string]any{"n": 3}, &out); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if !out.OK || out.N != 3 {
		t.Errorf("Do() decoded %+v; want {OK:true N:3}", out)
	}
	r, body := f.request(0)
	got := map[string]string{"method": r.Method, "path": r.URL.Path}
	for _, k := range []string{"Content-Type", "Accept", "User-Agent", "Authorization"} {
		got[k] = r.Header.Get(k)
	}
	want := map[string]string{
		"method": "POST", "path": "/graphql", "Content-Type": "application/json", "Accept": "application/test+json",
		"User-Agent": "legion", "Authorization": "Token " + testSecret,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
	wantBody := map[string]any{"query": opRead.Query, "operationName": "Read", "variables": map[string]any{"n": 3.0}}
	if diff := cmp.Diff(wantBody, sent); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

// TestDoDefaults: no variables, no out, no Accept, no credential, no
// hint, no logger, no HTTP client: the defaults.
func TestDoDefaults(t *testing.T) {
	f := newFake(t, reply{status: 200, body: `{"data":{}}`}, reply{status: 401, body: `{}`})
	svc := *testService
	svc.Accept = ""
	c := New(&svc, Options{Endpoint: f.URL})
	if err := c.Do(t.Context(), opWrite, nil, nil); err != nil {
		t.Fatalf("Do: %v", err)
	}
	r, body := f.request(0)
	if got := r.Header.Get("Accept"); got != "application/json" {
		t.Errorf("Accept = %q; want application/json", got)
	}
	if got, ok := r.Header["Authorization"]; ok {
		t.Errorf("Authorization = %q; want none", got)
	}
	if got, want := string(body), `{"query":"mutation Write { ok }","operationName":"Write"}`; got != want {
		t.Errorf("request body = %s; want %s", got, want)
	}
	if err := c.Do(t.Context(), opWrite, nil, nil); !errors.Is(err, ErrAuth) || err.Error() != "test: authentication failed" {
		t.Errorf("Do() error = %v; want exactly %q", err, "test: authentication failed")
	}
}

func TestDoRetries(t *testing.T) {
	var (
		ok        = reply{status: 200, body: `{"data":{"ok":true}}`}
		down      = reply{status: 503, body: "<html>down</html>"}
		hangup    = reply{hangup: true}
		cut       = reply{cut: true}
		slow      = reply{status: 429, header: http.Header{"Retry-After": {"0"}}, body: `{}`}
		slowCode  = reply{status: 200, body: `{"errors":[{"message":"slow down","extensions":{"code":"SLOW_DOWN"}}]}`}
		tooLong   = reply{status: 429, header: http.Header{"Retry-After": {"3600"}}, body: `{}`}
		rejected  = reply{status: 401, body: `{"message":"Bad credentials"}`}
		garbage   = reply{status: 200, body: `<html>`}
		apiErr    = reply{status: 200, body: `{"errors":[{"message":"no such thing","extensions":{"code":"NOT_FOUND"}}]}`}
		mismatch  = reply{status: 200, body: `{"data":{"ok":"yes"}}`}
		threeDown = []reply{down, down, down}
	)
	for _, tc := range []struct {
		name      string
		op        Operation
		replies   []reply
		wantIs    error
		wantCode  string // the service's API error
		wantErr   string // the error's text contains this
		wantCalls int
	}{
		{name: "server error, then ok", op: opRead, replies: []reply{down, ok}, wantCalls: 2},
		{name: "hangup, then ok", op: opRead, replies: []reply{hangup, ok}, wantCalls: 2},
		{name: "cut body, then ok", op: opRead, replies: []reply{cut, ok}, wantCalls: 2},
		{name: "write after a cut body", op: opWrite, replies: []reply{cut, ok}, wantCalls: 1,
			wantErr: "test: Write: read response: unexpected EOF (not retried: it may have taken effect)"},
		{name: "rate limit, then ok", op: opRead, replies: []reply{slow, slowCode, ok}, wantCalls: 3},
		{name: "write after a rate limit", op: opWrite, replies: []reply{slowCode, ok}, wantCalls: 2},
		{name: "write after a server error", op: opWrite, replies: []reply{down, ok}, wantCalls: 1,
			wantErr: `test: Write: server error: HTTP 503: "<html>down</html>" (not retried: it may have taken effect)`},
		{name: "write after a hangup", op: opWrite, replies: []reply{hangup, ok}, wantCalls: 1, wantErr: "not retried"},
		{name: "server errors", op: opRead, replies: threeDown, wantCalls: 3,
			wantErr: `test: Read: gave up after 3 attempts: server error: HTTP 503`},
		{name: "rate limits", op: opRead, replies: []reply{slow, slow, slowCode}, wantCalls: 3, wantIs: ErrRateLimited,
			wantErr: "test: Read: rate limited after 3 attempts (HTTP 200, SLOW_DOWN)"},
		{name: "asked to wait too long", op: opRead, replies: []reply{tooLong}, wantCalls: 1, wantIs: ErrRateLimited,
			wantErr: "test: Read: rate limited (HTTP 429): Test asks to wait 1h0m0s, more than 2m0s"},
		{name: "credential rejected", op: opRead, replies: []reply{rejected, ok}, wantCalls: 1, wantIs: ErrAuth,
			wantErr: "test: authentication failed: check " + testHint + " (Bad credentials)"},
		{name: "malformed", op: opRead, replies: []reply{garbage, ok}, wantCalls: 1, wantIs: ErrMalformed},
		{name: "data does not match", op: opRead, replies: []reply{mismatch}, wantCalls: 1, wantIs: ErrMalformed,
			wantErr: "test: Read: malformed response: data does not match the query: JSON string where ok belongs"},
		{name: "API error", op: opWrite, replies: []reply{apiErr, ok}, wantCalls: 1, wantCode: "NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.replies...)
			var log bytes.Buffer
			var out struct {
				OK bool `json:"ok"`
			}
			err := newClient(f, &log).Do(t.Context(), tc.op, nil, &out)
			wantFail := tc.wantIs != nil || tc.wantCode != "" || tc.wantErr != ""
			switch {
			case !wantFail && err != nil:
				t.Fatalf("Do() error = %v; want success", err)
			case !wantFail && !out.OK:
				t.Errorf("Do() decoded %+v; want ok", out)
			case wantFail && err == nil:
				t.Fatalf("Do() succeeded; want an error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Do() error = %v; want %v", err, tc.wantIs)
			}
			if tc.wantCode != "" && !isAPIError(err, tc.wantCode) {
				t.Errorf("Do() error = %v; want the service's API error %s", err, tc.wantCode)
			}
			if tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Do() error = %q; want it to contain %q", err, tc.wantErr)
			}
			if n := f.calls(); n != tc.wantCalls {
				t.Errorf("requests = %d; want %d", n, tc.wantCalls)
			}
			if retries := strings.Count(log.String(), "test request failed; retrying"); retries != tc.wantCalls-1 {
				t.Errorf("retries logged = %d; want %d", retries, tc.wantCalls-1)
			}
			for what, s := range map[string]string{"error": errText(err), "log": log.String()} {
				if strings.Contains(s, testSecret) {
					t.Errorf("the %s contains the credential: %s", what, s)
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDoHonoursWait: the wait a server asks for replaces a shorter
// backoff. The logged wait is checked, not the clock.
func TestDoHonoursWait(t *testing.T) {
	f := newFake(t, reply{status: 429, header: http.Header{"Retry-After": {"1"}}, body: `{}`})
	var log bytes.Buffer
	if err := newClient(f, &log).Do(t.Context(), opRead, nil, nil); err != nil {
		t.Fatalf("Do: %v", err)
	}
	var rec struct {
		Msg       string
		Operation string
		Attempt   int
		Wait      time.Duration
	}
	if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &rec); err != nil {
		t.Fatalf("log %q: want one JSON record: %v", log.String(), err)
	}
	if rec.Msg != "test request failed; retrying" || rec.Operation != "Read" || rec.Attempt != 1 || rec.Wait < time.Second {
		t.Errorf("logged %+v; want a retry of Read after attempt 1 waiting at least 1s", rec)
	}
	if n := f.calls(); n != 2 {
		t.Errorf("requests = %d; want 2", n)
	}
}

// TestDoContext: a cancelled context ends a backoff in progress, and stops
// a request before it is sent.
func TestDoContext(t *testing.T) {
	t.Run("during backoff", func(t *testing.T) {
		f := newFake(t, reply{status: 429, header: http.Header{"Retry-After": {"3600"}}, body: `{}`})
		c := New(testService, Options{Endpoint: f.URL, Retry: Retry{MaxWait: 2 * time.Hour}})
		ctx, cancel := context.WithCancel(t.Context())
		f.mu.Lock()
		f.onRequest = cancel
		f.mu.Unlock()
		err := c.Do(ctx, opRead, nil, nil)
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "test: Read: ") {
			t.Errorf("Do() error = %v; want test: Read: context.Canceled", err)
		}
		if n := f.calls(); n != 1 {
			t.Errorf("requests = %d; want 1", n)
		}
	})
	t.Run("before sending", func(t *testing.T) {
		f := newFake(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := New(testService, Options{Endpoint: f.URL}).Do(ctx, opRead, nil, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do() error = %v; want context.Canceled", err)
		}
		if n := f.calls(); n != 0 {
			t.Errorf("requests = %d; want 0", n)
		}
	})
}

func TestDoBadInput(t *testing.T) {
	f := newFake(t)
	c := New(testService, Options{Endpoint: f.URL})
	if err := c.Do(t.Context(), opRead, map[string]any{"n": make(chan int)}, nil); err == nil || !strings.Contains(err.Error(), "test: Read: encode request") {
		t.Errorf("Do(unencodable variables) error = %v; want an encode error", err)
	}
	bad := New(testService, Options{Endpoint: "http://[::1"})
	if err := bad.Do(t.Context(), opRead, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "test: Read: ") {
		t.Errorf("Do(bad endpoint) error = %v; want one naming the operation", err)
	}
	if n := f.calls(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

// TestDoHeader: the header of the last response that arrived comes back,
// on success and on failure; nil when no response arrived.
func TestDoHeader(t *testing.T) {
	tagged := func(r reply, tag string) reply {
		r.header = http.Header{"X-Tag": {tag}}
		return r
	}
	var (
		ok       = reply{status: 200, body: `{"data":{"ok":true}}`}
		down     = reply{status: 503, body: "down"}
		hangup   = reply{hangup: true}
		rejected = reply{status: 401, body: `{"message":"Bad credentials"}`}
		apiErr   = reply{status: 200, body: `{"errors":[{"message":"no such thing","extensions":{"code":"NOT_FOUND"}}]}`}
	)
	for _, tc := range []struct {
		name    string
		replies []reply
		wantTag string // "" for a nil header
		wantErr bool
	}{
		{"success", []reply{tagged(ok, "a")}, "a", false},
		{"retried, then success", []reply{tagged(down, "a"), tagged(ok, "b")}, "b", false},
		{"answer, then hangups", []reply{tagged(down, "a"), hangup, hangup}, "a", true},
		{"only hangups", []reply{hangup, hangup, hangup}, "", true},
		{"rejected", []reply{tagged(rejected, "a")}, "a", true},
		{"API error", []reply{tagged(apiErr, "a")}, "a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.replies...)
			h, err := newClient(f, &bytes.Buffer{}).DoHeader(t.Context(), opRead, nil, nil)
			if (err != nil) != tc.wantErr {
				t.Errorf("DoHeader() error = %v; want error: %v", err, tc.wantErr)
			}
			switch {
			case tc.wantTag == "" && h != nil:
				t.Errorf("DoHeader() header = %v; want nil", h)
			case tc.wantTag != "" && h.Get("X-Tag") != tc.wantTag:
				t.Errorf("DoHeader() header X-Tag = %q; want %q", h.Get("X-Tag"), tc.wantTag)
			}
		})
	}
}
