package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Channel is one way of reaching a person.
type Channel interface {
	// Name names the channel in notify.json and in logs: "webhook",
	// "ntfy", "desktop". It is unique among a team's channels.
	Name() string
	// Send delivers m once and returns what the receiver answered, in a
	// line for a person ("200 OK", "id 42"). An error wrapping
	// ErrUnavailable says the channel is absent here (no session bus):
	// the wait counts as handled on it and is not retried. Any other
	// error is retried. Neither the answer nor the error holds a secret
	// or the channel's full URL.
	Send(ctx context.Context, m Message) (string, error)
}

// ErrUnavailable is a Channel's error when it cannot exist here: a send
// that fails with it is skipped, not retried.
var ErrUnavailable = errors.New("channel unavailable here")

// sendTimeout bounds one send of an HTTP channel.
const sendTimeout = 30 * time.Second

// maxAnswer is how much of a receiver's answer is read and quoted.
const maxAnswer = 512

// post sends req and reads the answer: a 2xx status is success, its body
// (trimmed, clipped) returned; any other is an error quoting it. Errors
// name host, never the URL (its path or query may be a secret).
func post(ctx context.Context, c *http.Client, req *http.Request, host string) (string, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", nil, fmt.Errorf("POST to %s: %w", host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return "", nil, fmt.Errorf("POST to %s: read the answer: %w", host, err)
	}
	answer := resp.Status
	if t := strings.TrimSpace(string(body)); t != "" {
		answer += ": " + clip(strings.Join(strings.Fields(t), " "), 200)
	}
	if resp.StatusCode/100 != 2 {
		return "", body, fmt.Errorf("POST to %s: %s", host, answer)
	}
	return answer, body, nil
}
