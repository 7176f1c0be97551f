package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// Ntfy publishes each Message to an ntfy topic with ntfy's own HTTP API
// (https://docs.ntfy.sh/publish/): a POST to https://HOST/TOPIC whose
// body is the text, with the headers Title, Tags and Click, and an
// access token as Authorization: Bearer when one is configured.
type Ntfy struct {
	url    string
	host   string
	token  string
	client *http.Client
}

// NewNtfy returns the ntfy channel to the topic URL rawURL, with token
// ("" for none; never logged). client nil is http.DefaultClient.
func NewNtfy(rawURL, token string, client *http.Client) (*Ntfy, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, errors.New("ntfy: notify.ntfy_url is not https://HOST/TOPIC")
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &Ntfy{url: rawURL, host: u.Host, token: token, client: client}, nil
}

// Name is "ntfy".
func (n *Ntfy) Name() string { return "ntfy" }

// Send publishes m; ntfy's answer is the published message as JSON, of
// which the answer quotes its id.
func (n *Ntfy) Send(ctx context.Context, m Message) (string, error) {
	req, err := http.NewRequest(http.MethodPost, n.url, strings.NewReader(m.Text()))
	if err != nil {
		return "", fmt.Errorf("ntfy: %w", err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("Title", headerText(m.Title()))
	tags := []string{"legion"}
	if len(m.Waits) == 1 {
		tags = append(tags, string(m.Waits[0].Kind))
	}
	req.Header.Set("Tags", strings.Join(tags, ","))
	if c := m.Click(); c != "" {
		req.Header.Set("Click", c)
	}
	if n.token != "" {
		req.Header.Set("Authorization", "Bearer "+n.token)
	}
	answer, body, err := post(ctx, n.client, req, n.host)
	if err != nil {
		return "", fmt.Errorf("ntfy: %w", err)
	}
	var pub struct {
		ID    string `json:"id"`
		Event string `json:"event"`
	}
	if json.Unmarshal(body, &pub) == nil && pub.ID != "" {
		return "published, id " + pub.ID, nil
	}
	return answer, nil
}

// headerText is s as a header value: as is when it is printable ASCII,
// else RFC 2047 encoded, which ntfy decodes in Title.
func headerText(s string) string {
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return mime.BEncoding.Encode("UTF-8", s)
		}
	}
	return s
}
