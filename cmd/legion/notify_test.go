package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/notify/notifytest"
)

// TestNotifyTest: `legion notify test TEAM` sends the sample to each
// configured channel (a webhook receiver that verifies the signature,
// an ntfy server that wants the token) and prints what each answered;
// the desktop, with no session bus, is skipped; nothing prints a secret.
func TestNotifyTest(t *testing.T) {
	dir := sandboxXDG(t)
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // no user manager, no session bus
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	hook := notifytest.NewWebhook(t, "whsec-0123")
	topic := notifytest.NewNtfy(t, "legion-demo", "tk_secret0123")
	secretFile := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte("# the notify webhook\nwhsec-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LEGION_TEST_NTFY_TOKEN", "tk_secret0123")
	cfg := filepath.Join(dir, "legion.toml")
	if _, errOut, err := legion(t, "--config", cfg, "team", "add", "demo", "--workspace", t.TempDir()); err != nil {
		t.Fatalf("team add: %v\n%s", err, errOut)
	}
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\n[teams.demo.notify]\nwebhook_url = \"" + hook.URL + "\"\nwebhook_secret_file = \"" + secretFile +
		"\"\nntfy_url = \"" + topic.URL + "\"\nntfy_token_env = \"LEGION_TEST_NTFY_TOKEN\"\ndesktop = true\n" +
		"dashboard_url = \"https://legion.example.net\"\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, err := legion(t, "--config", cfg, "notify", "test", "demo", "--json")
	if err != nil {
		t.Fatalf("notify test: %v\n%s", err, errOut)
	}
	var answers []notify.Answer
	if err := json.Unmarshal([]byte(out), &answers); err != nil {
		t.Fatalf("notify test --json printed %q: %v", out, err)
	}
	if len(answers) != 3 || answers[0].Answer != "204 No Content" || answers[1].Answer != "published, id m00001" || !answers[2].Skipped {
		t.Errorf("answers %+v; want the webhook's 204, ntfy's id, the desktop skipped", answers)
	}
	if d := hook.Deliveries(); len(d) != 1 || d[0].Message.Waits[0].URL != "https://legion.example.net/#needs/demo/SAMPLE-1" {
		t.Errorf("webhook took %+v; want one sample linking to https://legion.example.net/#needs/demo/SAMPLE-1", d)
	}
	if m := topic.Messages(); len(m) != 1 || !strings.HasPrefix(m[0].Title, "[test] demo SAMPLE-1") {
		t.Errorf("ntfy took %+v; want one sample", m)
	}
	if all := out + errOut; strings.Contains(all, "whsec-0123") || strings.Contains(all, "tk_secret0123") {
		t.Errorf("notify test printed a secret:\n%s", all)
	}

	// A wrong secret: the receiver refuses it, the command fails naming the channel.
	if err := os.WriteFile(secretFile, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = legion(t, "--config", cfg, "notify", "test", "demo")
	if err == nil || !strings.Contains(out, "webhook  failed") || !strings.Contains(out, "401") {
		t.Errorf("notify test with a wrong secret: err %v, printed:\n%s\nwant the webhook failed with the receiver's 401", err, out)
	}
}
