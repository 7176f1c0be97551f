package notify_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/notify/notifytest"
)

var links = notify.Links{Base: "http://127.0.0.1:7787"}

// TestWebhookSigned: a delivery verifies at a receiver that holds the
// secret, with the message, its headers and the card's link; a channel
// with another secret is refused there (401), and its error says so.
func TestWebhookSigned(t *testing.T) {
	rx := notifytest.NewWebhook(t, "s3cret-webhook")
	w, err := notify.NewWebhook(rx.URL, "s3cret-webhook", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := notify.Sample("demo team", links, time.Now())
	answer, err := w.Send(t.Context(), m)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if answer != "204 No Content" {
		t.Errorf("Send answered %q; want 204 No Content", answer)
	}
	got := rx.Deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver took %d deliveries; want 1", len(got))
	}
	d := got[0]
	if e := d.Header.Get(notify.HeaderEvent); e != notify.EventTest {
		t.Errorf("%s = %q; want %q", notify.HeaderEvent, e, notify.EventTest)
	}
	if id := d.Header.Get(notify.HeaderDelivery); id == "" || id != d.Message.Delivery {
		t.Errorf("%s = %q; want the message's delivery %q", notify.HeaderDelivery, id, d.Message.Delivery)
	}
	if card := d.Message.Waits[0].URL; card != "http://127.0.0.1:7787/#needs/demo%20team/SAMPLE-1" {
		t.Errorf("card URL %q; want http://127.0.0.1:7787/#needs/demo%%20team/SAMPLE-1", card)
	}

	wrong, err := notify.NewWebhook(rx.URL, "not-the-secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Send(t.Context(), m)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Send with the wrong secret: %v; want the receiver's 401", err)
	}
	if rej := rx.Rejected(); len(rej) != 1 || !errors.Is(rej[0], notify.ErrBadSignature) {
		t.Errorf("receiver rejected %v; want one ErrBadSignature", rej)
	}
	if len(rx.Deliveries()) != 1 {
		t.Errorf("receiver took the wrongly signed delivery")
	}
	if strings.Contains(err.Error(), "not-the-secret") || strings.Contains(err.Error(), "/hooks/legion") {
		t.Errorf("error %q quotes the secret or the URL's path", err)
	}
}

// TestVerify: what a receiver checks, case by case.
func TestVerify(t *testing.T) {
	secret := []byte("k")
	body := []byte(`{"event":"needs_you"}`)
	now := time.Unix(1_800_000_000, 0)
	ts := "1800000000"
	good := notify.Sign(secret, ts, body)
	for _, tt := range []struct {
		name      string
		secret    string
		ts, sig   string
		body      string
		tolerance time.Duration
		want      error
	}{
		{"good", "k", ts, good, string(body), time.Minute, nil},
		{"wrong secret", "other", ts, good, string(body), time.Minute, notify.ErrBadSignature},
		{"body changed", "k", ts, good, `{"event":"test"}`, time.Minute, notify.ErrBadSignature},
		{"timestamp changed", "k", "1800000001", good, string(body), time.Minute, notify.ErrBadSignature},
		{"at the second, tight tolerance", "k", ts, good, string(body), time.Nanosecond, nil},
		{"too old", "k", "1799990000", notify.Sign(secret, "1799990000", body), string(body), time.Minute, notify.ErrStale},
		{"no prefix", "k", ts, strings.TrimPrefix(good, "sha256="), string(body), time.Minute, notify.ErrMalformed},
		{"short", "k", ts, good[:20], string(body), time.Minute, notify.ErrMalformed},
		{"no timestamp", "k", "", good, string(body), time.Minute, notify.ErrMalformed},
		{"timestamp not canonical", "k", "+1800000000", notify.Sign(secret, "+1800000000", body), string(body), 0, notify.ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(notify.HeaderTimestamp, tt.ts)
			h.Set(notify.HeaderSignature, tt.sig)
			err := notify.Verify([]byte(tt.secret), h, []byte(tt.body), now, tt.tolerance)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Verify(%s) = %v; want %v", tt.name, err, tt.want)
			}
		})
	}
}

// TestNtfy: a message reaches an ntfy topic with its title (RFC 2047
// for non-ASCII), tags, click link and token; a wrong token is refused.
func TestNtfy(t *testing.T) {
	srv := notifytest.NewNtfy(t, "legion-demo", "tk_0123456789abcdef")
	c, err := notify.NewNtfy(srv.URL, "tk_0123456789abcdef", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := notify.Sample("équipe", links, time.Now())
	answer, err := c.Send(t.Context(), m)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if answer != "published, id m00001" {
		t.Errorf("Send answered %q; want published, id m00001", answer)
	}
	got := srv.Messages()
	if len(got) != 1 {
		t.Fatalf("ntfy took %d messages; want 1", len(got))
	}
	p := got[0]
	if p.Title != m.Title() || !strings.HasPrefix(p.Title, "[test] équipe SAMPLE-1") {
		t.Errorf("title %q; want %q", p.Title, m.Title())
	}
	if p.Message != m.Text() || !strings.Contains(p.Message, "is this channel set up?") {
		t.Errorf("message %q; want %q", p.Message, m.Text())
	}
	if want := "http://127.0.0.1:7787/#needs/%C3%A9quipe/SAMPLE-1"; p.Click != want {
		t.Errorf("click %q; want %q", p.Click, want)
	}
	if strings.Join(p.Tags, ",") != "legion,"+string(controller.WaitQuestion) {
		t.Errorf("tags %v; want legion,question", p.Tags)
	}

	bad, err := notify.NewNtfy(srv.URL, "tk_wrong", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Send(t.Context(), m); err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "tk_wrong") {
		t.Errorf("Send with a wrong token: %v; want ntfy's 403, without the token", err)
	}
}
