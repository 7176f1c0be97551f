package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The webhook's headers. README: Operations: notifications documents
// them for receivers.
const (
	HeaderTimestamp = "X-Legion-Timestamp" // Unix seconds, decimal
	HeaderSignature = "X-Legion-Signature" // "sha256=" + hex HMAC
	HeaderEvent     = "X-Legion-Event"     // Message.Event
	HeaderDelivery  = "X-Legion-Delivery"  // Message.Delivery
)

// Webhook POSTs each Message as JSON to a URL, signed with a shared
// secret.
type Webhook struct {
	url    string
	host   string
	secret []byte
	client *http.Client
}

// NewWebhook returns the webhook channel to rawURL signing with secret
// (neither is ever logged). client nil is http.DefaultClient.
func NewWebhook(rawURL, secret string, client *http.Client) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("webhook: notify.webhook_url is not an http(s) URL")
	}
	if secret == "" {
		return nil, errors.New("webhook: empty secret")
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &Webhook{url: rawURL, host: u.Host, secret: []byte(secret), client: client}, nil
}

// Name is "webhook".
func (w *Webhook) Name() string { return "webhook" }

// Send POSTs m's JSON with the headers above; a 2xx answer is success.
func (w *Webhook) Send(ctx context.Context, m Message) (string, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("webhook: encode the message: %w", err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest(http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "legion-notify/1")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(w.secret, ts, body))
	req.Header.Set(HeaderEvent, m.Event)
	req.Header.Set(HeaderDelivery, m.Delivery)
	answer, _, err := post(ctx, w.client, req, w.host)
	if err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	return answer, nil
}

// Sign is the X-Legion-Signature of body sent at timestamp ts (the
// X-Legion-Timestamp value, as sent): "sha256=" and the lowercase hex
// HMAC-SHA256, keyed with secret, of ts + "." + body.
func Sign(secret []byte, ts string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("signature does not match")
	ErrStale        = errors.New("timestamp outside the tolerance")
	ErrMalformed    = errors.New("malformed signature headers")
)

// Verify checks a delivery as a receiver does: h's X-Legion-Signature
// must be Sign(secret, X-Legion-Timestamp, body) (hex digits in either
// case), compared in constant time, and the timestamp within tolerance of now (a replay window; 0
// skips the check). It returns nil, or an error wrapping ErrMalformed,
// ErrStale or ErrBadSignature.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts := h.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts != strconv.FormatInt(sec, 10) {
		return fmt.Errorf("%w: %s is not Unix seconds", ErrMalformed, HeaderTimestamp)
	}
	got, ok := strings.CutPrefix(h.Get(HeaderSignature), "sha256=")
	if !ok {
		return fmt.Errorf("%w: %s does not start with sha256=", ErrMalformed, HeaderSignature)
	}
	mac, err := hex.DecodeString(got)
	if err != nil || len(mac) != sha256.Size {
		return fmt.Errorf("%w: %s is not 64 hex digits after sha256=", ErrMalformed, HeaderSignature)
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
			return fmt.Errorf("%w: %s is %s from now", ErrStale, HeaderTimestamp, d.Round(time.Second))
		}
	}
	want, _ := hex.DecodeString(strings.TrimPrefix(Sign(secret, ts, body), "sha256="))
	if !hmac.Equal(mac, want) {
		return ErrBadSignature
	}
	return nil
}
