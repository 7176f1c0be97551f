package systemtest_test

import (
	"errors"
	"strings"
	"testing"
)

// sandboxCheck is one line of the sandboxed agent's script: NAME is "ok"
// when the shell command succeeds, "denied" when it fails, appended to
// /tmp/sandbox.result.
func sandboxCheck(name, command string) string {
	return "run sh -c 'if " + command + " >/dev/null 2>&1; then echo ok " + name + "; else echo denied " + name + "; fi >> /tmp/sandbox.result'"
}

// TestSandboxAsUser: in a booted system, as an ordinary user whose team
// runs the default policy (sandbox), the planner agent (the scripted
// agent, running shell commands as a model would) may write its
// worktree, commit, write ~/.cache and /tmp and label its own issue
// (through its worker); its writes to ~/.bashrc, ~/.ssh, /etc and the
// main checkout fail, ~/.ssh/id_x and the tracker file cannot be read,
// Legion's helper refuses it, and the user's D-Bus and the user manager
// are out of its reach (systemd-run --user would run anything outside the
// sandbox; Landlock below ABI 9 does not stop connections to pathname
// unix sockets, so the worker unit hides them).
func TestSandboxAsUser(t *testing.T) {
	t.Parallel()
	script := strings.Join([]string{
		"once " + sandboxCheck("write-worktree", "echo x > f"),
		"once " + sandboxCheck("git-commit", "git add f && git commit -qm sandboxed"),
		"once " + sandboxCheck("write-cache", "echo x > $HOME/.cache/x"),
		"once " + sandboxCheck("write-tmp", "echo x > /tmp/sandbox.x"),
		"once " + sandboxCheck("tracker-own", "legion issue label $LEGION_TEAM $LEGION_ISSUE sandboxed"),
		"once " + sandboxCheck("write-bashrc", "echo x >> $HOME/.bashrc"),
		"once " + sandboxCheck("write-ssh", "echo x > $HOME/.ssh/x"),
		"once " + sandboxCheck("read-ssh-key", "cat $HOME/.ssh/id_x"),
		"once " + sandboxCheck("write-etc", "echo x > /etc/sandbox.x"),
		"once " + sandboxCheck("write-main-checkout", "echo x >> $HOME/src/web/README"),
		"once " + sandboxCheck("read-tracker", "cat $HOME/.local/state/legion/teams/*/tracker/issues.json"),
		"once " + sandboxCheck("helper", "legion sessions list"),
		// systemd would run anything outside the sandbox for it.
		"once " + sandboxCheck("systemd-run", "systemd-run --user --quiet --collect touch /tmp/escaped"),
		"once " + sandboxCheck("user-bus", "busctl --user list"),
		"once run sh -c 'echo done >> /tmp/sandbox.result'",
		"",
	}, "\n")
	s := bootLegion(t, options{linger: true, script: script})
	s.writeFile("/home/"+user+"/.bashrc", "# rc\n", 0o644, user)
	s.root("install", "-d", "-m", "700", "-o", user, "/home/"+user+"/.ssh")
	s.writeFile("/home/"+user+"/.ssh/id_x", "PRIVATE KEY\n", 0o600, user)
	s.login("legion", "team", "add", teamName, "--workspace", "src/web")
	s.login("legion", "install", "--enable", teamName)
	id := strings.TrimSpace(s.login("legion", "issue", "add", teamName, "Check the sandbox"))
	s.login("systemctl", "--user", "start", "legion@"+teamName)
	var got string
	s.until("the sandboxed agent's results in /tmp/sandbox.result", func() error {
		out, err := s.Run(s.ctx, "cat", "/tmp/sandbox.result")
		if err != nil || !strings.Contains(out, "done\n") {
			return errors.New("not yet: " + out)
		}
		got = out
		return nil
	})
	t.Logf("the sandboxed agent's results:\n%s", got)
	want := map[string]string{
		"write-worktree": "ok", "git-commit": "ok", "write-cache": "ok", "write-tmp": "ok", "tracker-own": "ok",
		"write-bashrc": "denied", "write-ssh": "denied", "read-ssh-key": "denied", "write-etc": "denied",
		"write-main-checkout": "denied", "read-tracker": "denied", "helper": "denied",
		"systemd-run": "denied", "user-bus": "denied",
	}
	for name, w := range want {
		if !strings.Contains(got, w+" "+name+"\n") {
			t.Errorf("%s: want %s; results:\n%s", name, w, got)
		}
	}
	if out := s.login("cat", ".bashrc"); out != "# rc\n" {
		t.Errorf("~/.bashrc = %q; want it untouched", out)
	}
	if is, err := s.issue(id); err != nil || !hasLabel(is, "sandboxed") {
		t.Errorf("issue %s = %+v, %v; want the label the agent added through its worker", id, is, err)
	}
	if out := s.root("sh", "-c", "journalctl -o cat | grep 'agent started' | head -1"); !strings.Contains(out, "sandboxed=true") {
		t.Errorf("the planner's worker says: %q; want sandboxed=true", out)
	}
}
