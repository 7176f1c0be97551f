package doctor

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
)

// TestNotify: a team with notifications is checked as its controller sets
// them up: a webhook without its secret fails, naming the variable and
// the file, and says how to give it; a secret file others may read fails;
// with the secret in the manager's environment it passes; the desktop
// without a session bus warns, with one (a socket in XDG_RUNTIME_DIR)
// passes; a team without notifications gets no check.
func TestNotify(t *testing.T) {
	dir := t.TempDir()
	team := config.Team{Name: "demo", Notify: config.Notify{WebhookURL: "https://hooks.example.net/legion", WebhookSecretEnv: "HOOK_SECRET"}}
	env := func(kv ...string) workerEnv { return workerEnv{env: kv} }
	expect(t, checkNotify("/cfg/legion.toml", team, env()), Fail, "HOOK_SECRET", "environment.d")
	expect(t, checkNotify("/cfg/legion.toml", team, env("HOOK_SECRET=s3cret")), OK, "webhook", "")
	if c := checkNotify("/cfg/legion.toml", team, env("HOOK_SECRET=s3cret")); strings.Contains(c.Detail+c.Fix, "s3cret") {
		t.Errorf("the check shows the secret: %+v", c)
	}

	loose := filepath.Join(dir, "secret")
	if err := os.WriteFile(loose, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fileTeam := team
	fileTeam.Notify.WebhookSecretEnv, fileTeam.Notify.WebhookSecretFile = "", loose
	expect(t, checkNotify("/cfg/legion.toml", fileTeam, env()), Fail, loose, "chmod 600")

	desk := config.Team{Name: "demo", Notify: config.Notify{Desktop: true}}
	rt := filepath.Join(dir, "rt")
	if err := os.Mkdir(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	expect(t, checkNotify("/cfg/legion.toml", desk, env("XDG_RUNTIME_DIR="+rt)), Warn, "no session bus", "drop notify.desktop")
	l, err := net.Listen("unix", filepath.Join(rt, "bus"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	expect(t, checkNotify("/cfg/legion.toml", desk, env("XDG_RUNTIME_DIR="+rt)), OK, "desktop", "")
	if c := checkNotify("/cfg/legion.toml", desk, workerEnv{err: errors.New("no bus")}); c.Status != Warn {
		t.Errorf("without the manager's environment: %+v; want a warning", c)
	}
}
