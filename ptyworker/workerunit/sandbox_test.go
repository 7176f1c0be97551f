package workerunit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/envlist"
	"github.com/legion-dev/legion/ptyworker/confine"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// sandboxScript is the agent of TestSystemdSandbox: it tries each action
// and writes "ok NAME" or "denied NAME" to $RESULT, then "done".
const sandboxScript = `
cd "$WT"
try() { n=$1; shift; if "$@" >>"$WT/.log" 2>&1; then echo "ok $n"; else echo "denied $n"; fi >>"$RESULT"; }
try write-worktree sh -c 'echo x > f'
try git-commit sh -c 'git add f && git -c user.name=a -c user.email=a@b commit -qm sandboxed'
try write-cache sh -c 'mkdir -p "$HOME/.cache/go-build" && echo x > "$HOME/.cache/go-build/x"'
try write-tmp sh -c 'echo x > /tmp/legion-sandbox-test-$$ && rm /tmp/legion-sandbox-test-$$'
try own-hook sh -c 'echo "{\"hook_event_name\":\"SessionStart\",\"session_id\":\"$LEGION_SESSION\",\"source\":\"startup\"}" | "$LEGION" hook'
try write-bashrc sh -c 'echo x >> "$HOME/.bashrc"'
try write-ssh sh -c 'echo x > "$HOME/.ssh/x"'
try write-etc sh -c 'echo x > /etc/legion-sandbox-test'
try write-other-worktree sh -c 'echo x > "$OTHER_WT/f"'
try write-main-checkout sh -c 'echo x >> "$REPO/README"'
try write-git-config sh -c 'echo "[core]" >> "$REPO/.git/config"'
try read-ssh-key cat "$HOME/.ssh/id_x"
try read-other-spec cat "$OTHER_SPEC"
try other-worker sh -c 'echo "{\"hook_event_name\":\"SessionStart\"}" | LEGION_HOOK_SOCKET="$OTHER_SOCKET" "$LEGION" hook 2>"$WT/other-worker.err"; grep -q "runs in the worker unit" "$WT/other-worker.err"; test $? -ne 0'
try tracker-own sh -c '"$LEGION" issue label itteam ITTEAM-1 worker-done && "$LEGION" issue comment itteam ITTEAM-1 "a comment from the sandbox"'
try tracker-other sh -c '"$LEGION" issue label itteam ITTEAM-2 worker-done 2>"$WT/tracker-other.err"; grep -q "may act only on issue ITTEAM-1" "$WT/tracker-other.err"; test $? -ne 0'
try read-tracker cat "$TRACKER"
try read-legion-config cat "$LEGION_CONFIG"
echo done >>"$RESULT"
`

// TestSystemdSandbox runs an agent under the policy "sandbox" (its
// sandbox drawn by agent.SandboxFor, enforced by the worker's Landlock
// trampoline) in a worker unit of a real user manager, beside another
// session's worker, and checks what it could do.
func TestSystemdSandbox(t *testing.T) {
	if st := confine.Probe(); !st.Holds {
		if os.Getenv("CI") == "true" {
			t.Fatalf("sandbox does not hold: %s", st.Why)
		}
		t.Skipf("sandbox does not hold: %s", st.Why)
	}
	// The sandbox lets the agent write /tmp (and /var/tmp): the manager's
	// home, where a user's is, must not be below them.
	realHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(realHome, ".cache", "legion-test")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(scratch) }) // once empty: the last test to end removes it
	t.Setenv("TMPDIR", scratch)
	bin := sdtest.LegionBinary(t) // built before the manager, in the real TMPDIR's cache
	sd := sdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to the private manager: %v", err)
	}
	t.Cleanup(func() { mgr.Close() })

	home := sd.Home
	repo := filepath.Join(home, "src", "app")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Env = sd.Env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	mustWrite(t, filepath.Join(repo, "README"), "main\n")
	git("-C", repo, "init", "-q", "-b", "main")
	git("-C", repo, "add", "README")
	git("-C", repo, "commit", "-qm", "init")
	wt := filepath.Join(home, "wt", "ITTEAM-1")
	other := filepath.Join(home, "wt", "ENG-8")
	git("-C", repo, "worktree", "add", "-q", "-b", "eng-7", wt)
	git("-C", repo, "worktree", "add", "-q", "-b", "eng-8", other)
	cfg := filepath.Join(home, ".config", "legion", "legion.toml")
	legionCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--config", cfg}, args...)...)
		cmd.Env = sd.Env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("legion %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	legionCmd("team", "add", "itteam", "--workspace", repo)
	legionCmd("issue", "add", "itteam", "The agent's issue")
	legionCmd("issue", "add", "itteam", "Another issue")
	mustWrite(t, filepath.Join(home, ".ssh", "id_x"), "PRIVATE KEY\n")
	mustWrite(t, filepath.Join(home, ".bashrc"), "# rc\n")
	result := filepath.Join(wt, ".result")

	stateDir := filepath.Join(home, ".local", "state", "legion")
	paths := proto.Paths{RuntimeDir: filepath.Join(sd.RuntimeDir, "legion"), StateDir: stateDir}
	start := func(issue string, argv []string, env []string, sandboxed bool) *proto.Spec {
		t.Helper()
		id := uuid.NewString()
		tok, _ := proto.NewToken()
		unit, err := unitname.WorkerUnit("0123abcd", issue, "implement")
		if err != nil {
			t.Fatal(err)
		}
		s := &proto.Spec{
			Version: proto.SpecVersion, SessionID: id, Name: issue + "-implement", Team: "itteam", TeamShort: "0123abcd",
			Issue: issue, Mode: "implement", Role: "worker", Cwd: wt, Env: env, ArgvNew: argv,
			Agent: proto.AgentClaude, Token: tok, DaemonInstanceID: "it-daemon", Paths: paths, Unit: unit,
		}
		if sandboxed {
			s.Sandbox = agent.SandboxFor(agent.Session{
				ID: uuid.MustParse(id), Mode: "implement", Cwd: wt, Repo: repo, Home: home,
				Dir:       filepath.Join(stateDir, "agents", id),
				LookupEnv: func(k string) (string, bool) { return envlist.Lookup(sd.Env, k) },
			}, config.AgentClaude)
		}
		specPath := filepath.Join(stateDir, "specs", id+".json")
		if err := os.MkdirAll(filepath.Dir(specPath), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := proto.WriteSpec(specPath, s); err != nil {
			t.Fatal(err)
		}
		u, err := Transient(s, Policy{
			Binary: sdtest.WorkerBinary(t), SpecPath: specPath, Cooldown: sdCooldown, Watchdog: time.Minute,
			StartLimitBurst: 1, StartLimitInterval: 5 * time.Minute, StopTimeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := mgr.StartTransient(ctx, u); err != nil {
			t.Fatalf("start %s: %v\nmanager log:\n%s", u.Name, err, sd.Log())
		}
		t.Cleanup(func() { mgr.Stop(context.Background(), unit) })
		return s
	}
	otherSpec := start("ENG-8", []string{"sleep", "600"}, nil, false)
	otherSpecPath := filepath.Join(stateDir, "specs", otherSpec.SessionID+".json")
	trackers, _ := filepath.Glob(filepath.Join(stateDir, "teams", "*", "tracker", "issues.json"))
	if len(trackers) != 1 {
		t.Fatalf("the local tracker's issues.json below %s: found %v, want one", stateDir, trackers)
	}
	s := start("ITTEAM-1", []string{"/bin/sh", "-c", sandboxScript}, []string{
		"HOME=" + home, proto.EnvLegionBin + "=" + bin, "LEGION_CONFIG=" + cfg, "WT=" + wt, "RESULT=" + result, "REPO=" + repo, "OTHER_WT=" + other, "LEGION=" + bin,
		"OTHER_SPEC=" + otherSpecPath, "TRACKER=" + trackers[0], "OTHER_SOCKET=" + otherSpec.SocketPath(),
	}, true)

	var got string
	sess := &sdSession{t: t, sd: sd, mgr: mgr, spec: s, ctx: ctx}
	sess.waitFor("the sandboxed agent's results", func() bool {
		b, _ := os.ReadFile(result)
		got = string(b)
		return strings.Contains(got, "done\n")
	})
	want := map[string]string{
		"write-worktree": "ok", "git-commit": "ok", "write-cache": "ok", "write-tmp": "ok", "own-hook": "ok",
		"write-bashrc": "denied", "write-ssh": "denied", "write-etc": "denied", "write-other-worktree": "denied",
		"write-main-checkout": "denied", "write-git-config": "denied", "read-ssh-key": "denied", "read-other-spec": "denied",
		"other-worker": "denied", "tracker-own": "ok", "tracker-other": "denied", "read-tracker": "denied", "read-legion-config": "denied",
	}
	for name, w := range want {
		if !strings.Contains(got, w+" "+name+"\n") {
			log, _ := os.ReadFile(filepath.Join(wt, ".log"))
			t.Errorf("%s: want %s; results:\n%s\nlog:\n%s", name, w, got, log)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".bashrc")); string(b) != "# rc\n" {
		t.Errorf("~/.bashrc = %q; want it untouched", b)
	}
	// The commit is on the worktree's branch, as git in the repository sees it.
	cmd := exec.Command("git", "-C", repo, "log", "-1", "--format=%s", "eng-7")
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "sandboxed" {
		t.Errorf("git log eng-7 = %q, %v; want the agent's commit", out, err)
	}
	if out := legionCmd("issue", "show", "itteam", "ITTEAM-1"); !strings.Contains(out, "labels: worker-done") || !strings.Contains(out, "a comment from the sandbox") {
		t.Errorf("legion issue show ITTEAM-1:\n%s\nwant the label and the comment the sandboxed agent made through its worker", out)
	}
	if out := legionCmd("issue", "show", "itteam", "ITTEAM-2"); strings.Contains(out, "worker-done") {
		t.Errorf("legion issue show ITTEAM-2:\n%s\nwant no label: another issue is refused", out)
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "other-worker.err")); !strings.Contains(string(b), "runs in the worker unit") {
		t.Errorf("the other worker's refusal = %q; want it to say the peer runs in a worker unit", b)
	}
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
