package dashboard

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
)

// hookSecret is the demo team's webhook secret.
const hookSecret = "It's a Secret to Everybody"

// hookEnv is a legion.toml with team "demo" (github.repo acme/widgets,
// its webhook secret in a 0600 file), team "plain" (no webhook), team
// "agent" (run by a controller agent) and team "loose" (its secret file
// readable by others), a state directory
// of its own, and the dashboard's handler on it.
type hookEnv struct {
	t       *testing.T
	handler http.Handler
	wake    string // demo's wake file
	log     *bytes.Buffer
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	secret := filepath.Join(dir, "hook-secret")
	if err := os.WriteFile(secret, []byte("# the webhook's secret\n"+hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose-secret")
	if err := os.WriteFile(loose, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "legion.toml")
	toml := `[teams.demo]
id = "6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + dir + `"
github.repo = "acme/widgets"
github.webhook_secret_file = "` + secret + `"

[teams.plain]
id = "7f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + dir + `"
github.repo = "acme/widgets"

[teams.agent]
id = "9f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + dir + `"
controller = "agent"
github.repo = "acme/widgets"
github.webhook_secret_file = "` + secret + `"

[teams.loose]
id = "8f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + dir + `"
github.repo = "acme/widgets"
github.webhook_secret_file = "` + loose + `"
`
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	// The handler logs in the request's goroutine: ServeHTTP has
	// returned before the test reads the buffer.
	var log bytes.Buffer
	srv, err := New(Options{Token: strings.Repeat("t", 43), ConfigPath: path, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	demo, _ := cfg.Team("demo")
	state, err := config.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	return &hookEnv{t: t, handler: srv.Handler(), wake: team.WakePath(team.StateDir(demo, state)), log: &log}
}

// delivery is one request to the endpoint.
type delivery struct {
	team        string // "demo" when empty
	event       string // X-GitHub-Event
	id          string // X-GitHub-Delivery
	contentType string // application/json when empty
	body        string
	signature   string // X-Hub-Signature-256; "" leaves it out
}

// signed is a delivery of event with body, signed as GitHub signs it.
func signed(event, id, body string) delivery {
	return delivery{event: event, id: id, body: body, signature: Signature(hookSecret, []byte(body))}
}

func (e *hookEnv) post(d delivery) *httptest.ResponseRecorder {
	e.t.Helper()
	if d.team == "" {
		d.team = "demo"
	}
	r := httptest.NewRequest(http.MethodPost, "/hooks/github/"+url.PathEscape(d.team), strings.NewReader(d.body))
	r.RemoteAddr = "192.0.2.7:4711"
	r.Header.Set("Content-Type", cmpOr(d.contentType, "application/json"))
	r.Header.Set("X-GitHub-Event", d.event)
	r.Header.Set("X-GitHub-Delivery", d.id)
	if d.signature != "" {
		r.Header.Set(SignatureHeader, d.signature)
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, r)
	return w
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// woken is the reason in demo's wake file, "" when none was written.
func (e *hookEnv) woken() string {
	e.t.Helper()
	b, err := os.ReadFile(e.wake)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

const (
	issueOpened  = `{"action":"opened","issue":{"number":7,"title":"Add a README"},"repository":{"full_name":"acme/widgets","name":"widgets"},"sender":{"login":"ana"}}`
	otherRepo    = `{"action":"opened","issue":{"number":7},"repository":{"full_name":"acme/gadgets"},"sender":{"login":"ana"}}`
	projectItem  = `{"action":"edited","projects_v2_item":{"id":1,"content_node_id":"I_kw"},"organization":{"login":"ACME"},"sender":{"login":"ana"}}`
	otherOrgItem = `{"action":"edited","projects_v2_item":{"id":1},"organization":{"login":"umbrella"}}`
	repoPing     = `{"zen":"Keep it logically awesome.","hook_id":1,"repository":{"full_name":"acme/widgets"}}`
)

// TestGitHubHook: each kind of delivery gets its answer, and only a
// signed event of the team's repository writes the team's wake file.
func TestGitHubHook(t *testing.T) {
	form := "payload=" + url.QueryEscape(issueOpened)
	formDelivery := signed("issues", "d-form", form)
	formDelivery.contentType = "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name      string
		d         delivery
		code      int
		body      string // a part of the answer
		wantWoken string // the wake file's reason; "" for none
	}{
		{"issue opened", signed("issues", "72d3162e-cc78-11e3-81ab-4c9367dc0958", issueOpened), http.StatusAccepted, `"woken":"demo"`, "github issues delivery 72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"comment", signed("issue_comment", "d2", issueOpened), http.StatusAccepted, `"woken":"demo"`, "github issue_comment delivery d2"},
		{"form-encoded", formDelivery, http.StatusAccepted, `"woken":"demo"`, "github issues delivery d-form"},
		{"organization's project item", signed("projects_v2_item", "d3", projectItem), http.StatusAccepted, `"woken":"demo"`, "github projects_v2_item delivery d3"},
		{"newline in the delivery header", signed("issues", "d4\nforged", issueOpened), http.StatusAccepted, `"woken":"demo"`, "github issues delivery d4?forged"},
		{"ping", signed("ping", "d5", repoPing), http.StatusOK, "the webhook reaches Legion", ""},
		{"event Legion does not act on", signed("star", "d6", issueOpened), http.StatusOK, `event \"star\": Legion acts on issues`, ""},
		{"no signature", delivery{event: "issues", body: issueOpened}, http.StatusUnauthorized, "no X-Hub-Signature-256 header", ""},
		{"SHA-1 signature", delivery{event: "issues", body: issueOpened, signature: "sha1=7d38cdd689735b008b3c702edd92eea23791c5f6"}, http.StatusUnauthorized, "want sha256= followed by 64 hex digits", ""},
		{"short signature", delivery{event: "issues", body: issueOpened, signature: "sha256=abcd"}, http.StatusUnauthorized, "want sha256= followed by 64 hex digits", ""},
		{"another secret", delivery{event: "issues", body: issueOpened, signature: Signature("not the secret", []byte(issueOpened))}, http.StatusForbidden, "does not match the body", ""},
		{"body changed after signing", delivery{event: "issues", body: issueOpened + " ", signature: Signature(hookSecret, []byte(issueOpened))}, http.StatusForbidden, "does not match the body", ""},
		{"another repository", signed("issues", "d7", otherRepo), http.StatusBadRequest, `the delivery is for repository \"acme/gadgets\"; the team's github.repo is \"acme/widgets\"`, ""},
		{"another organization", signed("projects_v2_item", "d8", otherOrgItem), http.StatusBadRequest, `organization \"umbrella\"`, ""},
		{"nobody's payload", signed("issues", "d9", `{"action":"opened"}`), http.StatusBadRequest, "names no repository or organization", ""},
		{"not JSON", signed("issues", "d10", `{"repository":`), http.StatusBadRequest, "decode the JSON payload", ""},
		{"unknown team", delivery{team: "nobody", event: "issues", body: issueOpened, signature: Signature(hookSecret, []byte(issueOpened))}, http.StatusNotFound, `no GitHub webhook for team \"nobody\"`, ""},
		{"team without a secret", delivery{team: "plain", event: "issues", body: issueOpened, signature: Signature(hookSecret, []byte(issueOpened))}, http.StatusNotFound, `no GitHub webhook for team \"plain\"`, ""},
		{"team run by an agent", delivery{team: "agent", event: "issues", body: issueOpened, signature: Signature(hookSecret, []byte(issueOpened))}, http.StatusOK, `controller is an agent`, ""},
		{"secret readable by others", delivery{team: "loose", event: "issues", body: issueOpened, signature: Signature(hookSecret, []byte(issueOpened))}, http.StatusInternalServerError, "cannot read team", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newHookEnv(t)
			w := e.post(tc.d)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("POST %s = %d %s; want %d with %s", tc.name, w.Code, w.Body, tc.code, tc.body)
			}
			if got := e.woken(); got != tc.wantWoken {
				t.Errorf("wake file after %s = %q; want %q", tc.name, got, tc.wantWoken)
			}
			if strings.Contains(w.Body.String(), hookSecret) {
				t.Errorf("the answer %s contains the secret", w.Body)
			}
			logged := e.log.String()
			if tc.code == http.StatusUnauthorized || tc.code == http.StatusForbidden {
				for _, want := range []string{"level=WARN", "github webhook refused", "team=" + cmpOr(tc.d.team, "demo"), "remote=192.0.2.7:4711"} {
					if !strings.Contains(logged, want) {
						t.Errorf("the log of a refusal:\n%s\nwant it to say %q", logged, want)
					}
				}
			}
			for _, secret := range []string{hookSecret, "Add a README", "projects_v2_item\":"} {
				if strings.Contains(logged, secret) {
					t.Errorf("the log:\n%s\nshows %q (the secret or the body)", logged, secret)
				}
			}
		})
	}
}

// TestGitHubHookReplay: the same signed body again (GitHub's redelivery,
// or someone replaying a captured one) is answered and wakes nothing.
func TestGitHubHookReplay(t *testing.T) {
	e := newHookEnv(t)
	if w := e.post(signed("issues", "first", issueOpened)); w.Code != http.StatusAccepted {
		t.Fatalf("first delivery = %d %s; want 202", w.Code, w.Body)
	}
	if err := os.Remove(e.wake); err != nil {
		t.Fatal(err)
	}
	w := e.post(signed("issues", "again", issueOpened))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "seen before") {
		t.Errorf("the same body again = %d %s; want 200 saying it was seen before", w.Code, w.Body)
	}
	if got := e.woken(); got != "" {
		t.Errorf("the replay woke the controller: %q", got)
	}
}

// countingReader is a request body that counts what the handler read.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestGitHubHookBodyLimit: an unsigned delivery's body is not read at
// all, and a signed one's not past MaxWebhookBody: a body without end
// is refused with 413.
func TestGitHubHookBodyLimit(t *testing.T) {
	e := newHookEnv(t)
	for _, tc := range []struct {
		name      string
		signature string
		code      int
		maxRead   int64
	}{
		{"unsigned", "", http.StatusUnauthorized, 0},
		{"signed", Signature(hookSecret, []byte("anything")), http.StatusRequestEntityTooLarge, MaxWebhookBody + 64<<10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingReader{r: zeros{}}
			r := httptest.NewRequest(http.MethodPost, "/hooks/github/demo", body)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("X-GitHub-Event", "issues")
			if tc.signature != "" {
				r.Header.Set(SignatureHeader, tc.signature)
			}
			w := httptest.NewRecorder()
			e.handler.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Errorf("POST of an endless body, %s = %d %s; want %d", tc.name, w.Code, w.Body, tc.code)
			}
			if body.n > tc.maxRead {
				t.Errorf("the handler read %d bytes of the body; want at most %d", body.n, tc.maxRead)
			}
			if got := e.woken(); got != "" {
				t.Errorf("the controller was woken: %q", got)
			}
		})
	}
}

// TestGitHubHookTeamNameEscaped: a team whose name holds a slash and
// more is reached at its path-escaped name.
func TestGitHubHookTeamNameEscaped(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte(hookSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "legion.toml")
	toml := `[teams."web/ü team"]
id = "6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + dir + `"
github.repo = "acme/widgets"
github.webhook_secret_file = "` + secret + `"
`
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Token: strings.Repeat("t", 43), ConfigPath: path})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/hooks/github/"+url.PathEscape("web/ü team"), bytes.NewReader([]byte(issueOpened)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set(SignatureHeader, Signature(hookSecret, []byte(issueOpened)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got webhookAnswer
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || got.Woken != "web/ü team" {
		t.Errorf("POST to the escaped name = %d %+v; want 202 woken %q", resp.StatusCode, got, "web/ü team")
	}
}
