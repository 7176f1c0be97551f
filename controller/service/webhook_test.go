package service_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// TestWebhookWakesController: a signed GitHub delivery POSTed to the
// dashboard as installed (legion-web.service, socket-activated, under its
// unit's sandbox) wakes the team's controller, which ticks at an interval
// of an hour otherwise: the controller logs the delivery that woke it,
// and after that line the helper serves the tick's sessions.list. A
// delivery signed with another secret is refused by the same server.
func TestWebhookWakesController(t *testing.T) {
	const secret = "a webhook secret"
	e := start(t, "", teamOptions{wipLimit: 1, interval: "1h",
		extra: "github.repo = \"acme/widgets\"\ngithub.webhook_secret_file = \"~/.config/legion/github-webhook-secret\"\n"})
	ctx := testCtx(t)
	secretFile := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "github-webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The dashboard listens on its unix socket only (the TCP port is the
	// machine's, which a test in another package may hold), and logs to
	// the test's file.
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	e.dropIn(filepath.Join(unitDir, unitname.WebSocketUnit+".d", "90-test.conf"), "[Socket]\nListenStream=\nListenStream=%t/"+units.WebSocketPath+"\n")
	e.dropIn(filepath.Join(unitDir, unitname.WebUnit+".d", "90-test.conf"), fmt.Sprintf("[Service]\nStandardOutput=append:%s\nStandardError=append:%s\n", e.logFile, e.logFile))
	for _, args := range [][]string{{"daemon-reload"}, {"reset-failed", unitname.WebSocketUnit}, {"restart", unitname.WebSocketUnit}} {
		if out, err := e.sd.Systemctl(t, args...); err != nil {
			t.Fatalf("systemctl --user %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	sock := filepath.Join(e.sd.RuntimeDir, units.WebSocketPath)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(key, delivery string) (int, string) {
		t.Helper()
		body := fmt.Sprintf(`{"action":"labeled","issue":{"number":7},"label":{"name":"legion"},"repository":{"full_name":"acme/widgets"},"delivery":%q}`, delivery)
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write([]byte(body))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://legion-web/hooks/github/"+teamName, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST to the dashboard on %s: %v", sock, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	e.startController()
	if code, body := post("not the secret", "forged"); code != http.StatusForbidden {
		t.Errorf("a delivery signed with another secret = %d %s; want 403", code, body)
	}
	// The controller follows its wake file once it has set up its watch:
	// deliver (each one a new body, so none is taken for a replay) until
	// one is seen.
	n := 0
	var woken int // the offset of the first wake's line in the log
	waitfor.Check(t, waitFor, "a delivery logged by the controller as what woke it", func() error {
		n++
		if code, body := post(secret, fmt.Sprintf("d-%d", n)); code != http.StatusAccepted {
			t.Fatalf("delivery d-%d = %d %s; want 202", n, code, body)
		}
		b, err := os.ReadFile(e.logFile)
		if err != nil {
			return err
		}
		off := 0
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "msg=woken ") && strings.Contains(line, `by="github issues delivery d-`) {
				woken = off
				return nil
			}
			off += len(line)
		}
		return fmt.Errorf("%d deliveries, no wake logged", n)
	})
	e.poll(ctx, "the controller's tick after the wake (its sessions.list)", func() (bool, string) {
		b, _ := os.ReadFile(e.logFile)
		after := string(b[woken:])
		return strings.Contains(after, "cmd=sessions.list"), tail(after, 10)
	})
	if code, body := post("not the secret", "forged-again"); code != http.StatusForbidden {
		t.Errorf("a delivery signed with another secret = %d %s; want 403", code, body)
	}
	b, _ := os.ReadFile(e.logFile)
	if strings.Contains(string(b), secret) {
		t.Errorf("the log %s shows the webhook's secret", e.logFile)
	}
	if !strings.Contains(string(b), "github webhook refused") {
		t.Errorf("the log %s does not show the refused delivery", e.logFile)
	}
}
