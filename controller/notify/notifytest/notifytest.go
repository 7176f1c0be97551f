// Package notifytest holds local receivers for package notify's channels,
// speaking each one's wire format: a webhook receiver that verifies every
// delivery's signature as a real receiver must (notify.Verify), and an
// ntfy server (https://docs.ntfy.sh/publish/: POST /TOPIC, Title, Tags,
// Click, Bearer tokens, its JSON answers and errors). They record what
// they took, and can be told to fail the next requests.
//
// It is for tests only and must never be linked by code that ships.
package notifytest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/notify"
)

// Webhook is a webhook receiver: it answers 204 to a delivery whose
// signature verifies with Secret, 401 to one that does not.
type Webhook struct {
	URL    string
	Secret []byte

	mu       sync.Mutex
	fail     int
	got      []Delivery
	rejected []error
}

// Delivery is one verified webhook delivery.
type Delivery struct {
	Header  http.Header
	Message notify.Message
}

// NewWebhook starts a receiver for t, closed at its cleanup.
func NewWebhook(t testing.TB, secret string) *Webhook {
	w := &Webhook{Secret: []byte(secret)}
	srv := httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(srv.Close)
	w.URL = srv.URL + "/hooks/legion"
	return w
}

func (w *Webhook) serve(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || err != nil {
		http.Error(rw, "want POST", http.StatusMethodNotAllowed)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := notify.Verify(w.Secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
		w.rejected = append(w.rejected, err)
		http.Error(rw, "signature: "+err.Error(), http.StatusUnauthorized)
		return
	}
	if w.fail > 0 {
		w.fail--
		http.Error(rw, "busy, try later", http.StatusServiceUnavailable)
		return
	}
	var m notify.Message
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(rw, "want JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.got = append(w.got, Delivery{Header: r.Header.Clone(), Message: m})
	rw.WriteHeader(http.StatusNoContent)
}

// Fail makes the next n verified deliveries fail with 503.
func (w *Webhook) Fail(n int) { w.mu.Lock(); w.fail = n; w.mu.Unlock() }

// Deliveries are the deliveries taken so far.
func (w *Webhook) Deliveries() []Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Delivery(nil), w.got...)
}

// Rejected are the errors of the deliveries whose signature failed.
func (w *Webhook) Rejected() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.rejected...)
}

// Ntfy is an ntfy server with one topic.
type Ntfy struct {
	URL   string // the topic's URL
	Topic string
	Token string // "" takes anyone

	mu   sync.Mutex
	fail int
	seq  int
	got  []Published
}

// Published is a message as the ntfy server took it.
type Published struct {
	ID      string   `json:"id"`
	Time    int64    `json:"time"`
	Expires int64    `json:"expires"`
	Event   string   `json:"event"`
	Topic   string   `json:"topic"`
	Title   string   `json:"title,omitempty"`
	Message string   `json:"message"`
	Tags    []string `json:"tags,omitempty"`
	Click   string   `json:"click,omitempty"`
}

// NewNtfy starts an ntfy server for t with topic, requiring token when
// not "", closed at t's cleanup.
func NewNtfy(t testing.TB, topic, token string) *Ntfy {
	n := &Ntfy{Topic: topic, Token: token}
	srv := httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(srv.Close)
	n.URL = srv.URL + "/" + topic
	return n
}

// ntfyError is ntfy's JSON error answer.
func ntfyError(rw http.ResponseWriter, status, code int, msg string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	fmt.Fprintf(rw, `{"code":%d,"http":%d,"error":%q,"link":"https://ntfy.sh/docs/publish/"}`+"\n", code, status, msg)
}

func (n *Ntfy) serve(rw http.ResponseWriter, r *http.Request) {
	topic := strings.Trim(r.URL.Path, "/")
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		ntfyError(rw, http.StatusMethodNotAllowed, 40501, "method not allowed")
		return
	}
	if topic != n.Topic {
		ntfyError(rw, http.StatusNotFound, 40401, "page not found")
		return
	}
	if n.Token != "" && r.Header.Get("Authorization") != "Bearer "+n.Token {
		ntfyError(rw, http.StatusForbidden, 40301, "forbidden")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		ntfyError(rw, http.StatusBadRequest, 40000, "bad request")
		return
	}
	title, err := new(mime.WordDecoder).DecodeHeader(first(r.Header, "X-Title", "Title", "t"))
	if err != nil {
		ntfyError(rw, http.StatusBadRequest, 40000, "invalid title")
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail > 0 {
		n.fail--
		ntfyError(rw, http.StatusTooManyRequests, 42901, "limit reached: too many requests")
		return
	}
	n.seq++
	now := time.Now()
	p := Published{ID: fmt.Sprintf("m%05d", n.seq), Time: now.Unix(), Expires: now.Add(12 * time.Hour).Unix(),
		Event: "message", Topic: topic, Title: title, Message: string(body), Click: first(r.Header, "X-Click", "Click")}
	if tags := first(r.Header, "X-Tags", "Tags", "Tag", "ta"); tags != "" {
		p.Tags = strings.Split(tags, ",")
	}
	n.got = append(n.got, p)
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(p) // the client may have gone: nothing to do
}

func first(h http.Header, names ...string) string {
	for _, k := range names {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// Fail makes the next n publishes fail with ntfy's 429.
func (n *Ntfy) Fail(k int) { n.mu.Lock(); n.fail = k; n.mu.Unlock() }

// Messages are the messages published so far.
func (n *Ntfy) Messages() []Published {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Published(nil), n.got...)
}
