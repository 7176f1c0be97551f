package activation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// podClaude is the real Claude Code where a pod's user can run it: a
// directory of its own, 0755, holding a hard link to (or a copy of) the
// pinned binary, whose cache under root's home a pod's user cannot reach.
func podClaude(t *testing.T) string {
	t.Helper()
	bin, err := filepath.EvalSymlinks(claudetest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "legion-pod-claude-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "claude")
	if err := os.Link(bin, dst); err != nil {
		in, err := os.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestKubeClaude: the real Claude Code runs in a pod (the real worker,
// runc on a kwok node, against the local fake of the Anthropic API) with
// the files its kind prepares made in the pod by `legion agent prepare`
// from the controller's plan (agent.PlanForPod, shipped in the spec
// Secret): it starts with no dialog (its settings and ~/.claude.json's
// answers are on the issue's volume), its hooks reach the worker in the
// pod, and the helper follows the worker through the API server: the
// agent's wait for a person's permission shows in the session's state,
// a person's allow reaches it, and its turn's end shows as idle.
func TestKubeClaude(t *testing.T) {
	legion := sdtest.LegionBinary(t)
	binDir := filepath.Dir(legion)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	claudeBin := podClaude(t)
	path := binDir + ":/usr/bin:/bin"
	c := kubetest.Start(t, kubetest.Options{RunPods: true, PodBinds: []string{binDir, filepath.Dir(claudeBin)}, PodEnv: []string{"PATH=" + path},
		ExecEnv: map[string]string{"PATH": path}})
	const ns = "legion-claude"
	kubeNamespace(t, c, ns, 1)
	ip := startInProcess(t, true, Options{KubeBinary: sdtest.KubeBinary(t)})
	cl := ip.client(t)
	ctx := t.Context()

	srv := anthropictest.NewServer(t)
	srv.Key = claudetest.Token

	a := kubeLaunch(c, ns, "DEMO-31", "implement")
	work := wire.WorkDir
	cfg := config.Agent{Kind: config.AgentClaude, Permissions: config.PermissionsAllowlist,
		New:    []string{claudeBin, "--session-id", "{session_id}", "{prompt}"},
		Resume: []string{claudeBin, "--resume", "{session_id}"}}
	kind := claude.New(cfg)
	sid := kind.SessionID(config.AdhocTeamID, "DEMO-31", "implement")
	s := agent.Session{
		ID: sid, Mode: "implement",
		Vars: config.Vars{SessionID: sid.String(), Issue: "DEMO-31", Mode: "implement", Workspace: work, Prompt: "Make the file."},
		Cwd:  work, Repo: work, Home: wire.HomeDir,
		Dir:    filepath.Join(wire.StateDir, "agents", a.ID),
		Legion: legion,
		Env: []string{"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_AUTH_TOKEN=" + claudetest.Token, "CLAUDE_CODE_MAX_RETRIES=0",
			"LEGION_TEAM=" + config.AdhocTeam, "LEGION_ISSUE=DEMO-31", "LEGION_MODE=implement"},
		Pod: true,
	}
	planned, err := kind.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	l, plan, err := agent.PlanForPod(ctx, kind, cfg, s, planned)
	if err != nil {
		t.Fatal(err)
	}
	a.Agent, a.AgentSession, a.Legion = l.Agent, sid.String(), legion
	a.Argv, a.ArgvResume, a.Env = l.ArgvNew, l.ArgvResume, append(slices.Clone(s.Env), l.Env...)
	a.Watch, a.StartupGrace, a.StaleAfter = l.SessionFile, new(api.Duration(2*time.Minute)), api.Duration(10*time.Minute)
	a.OwnCommands = agent.OwnCommands(config.PermissionsAllowlist)
	a.KubeFiles = map[string][]byte{agent.PodPrepareFile: plan}
	// The worktree first (the controller's `legion worktree ensure`),
	// then the agent's files.
	a.Prepare = [][]string{{"/bin/mkdir", "-p", work}, {legion, "agent", "prepare", filepath.Join(wire.SpecDir, agent.PodPrepareFile)}}

	const made = wire.WorkDir + "/made-in-the-pod"
	srv.Script(sid.String(),
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Bash("touch "+made, "Make the file").WithID("toolu_kube_1")}},
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Made it.")}},
	)
	if _, err := cl.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// Say why the worker in the pod ended, from the volume.
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "legion.dev/session=" + a.ID})
		if err != nil {
			t.Log(err)
			return
		}
		for _, p := range pods.Items {
			vol := c.VolumeDir(ns, p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
			r, err := proto.ReadRegistry(filepath.Join(vol, "state", "registry", a.ID+".json"))
			if err == nil && r.LastExit != nil {
				t.Logf("pod %s: the registry's last exit: %+v", p.Name, *r.LastExit)
			}
			tr, _ := os.ReadFile(filepath.Join(vol, "state", "transcripts", a.ID+".log"))
			t.Logf("pod %s: transcript's end:\n%s", p.Name, tr[max(0, len(tr)-3000):])
			return
		}
	})

	// The wait for a person, through the helper (list), as the
	// controller reads it.
	v := kubeSession(t, cl, a.Name, "waiting for permission to run Bash", func(s api.Session) bool {
		return s.Agent != nil && s.Agent.State == api.AgentWaitingPermission
	})
	if v.Agent.Tool != "Bash" || !strings.Contains(v.Agent.Command, made) {
		t.Errorf("agent %+v; want Bash waiting to run touch %s", v.Agent, made)
	}
	pods := podsOf(t, c, ns, a.ID)
	if len(pods) != 1 {
		t.Fatalf("%d pods; want 1", len(pods))
	}
	vol := c.VolumeDir(ns, pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	settings := filepath.Join(vol, "state", "agents", a.ID, claude.SettingsFileName)
	if fi, err := os.Stat(settings); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("settings on the volume: %v, %v; want a 0600 file made in the pod", fi, err)
	}
	var cj map[string]any
	b, err := os.ReadFile(filepath.Join(vol, "home", ".claude.json"))
	if err == nil {
		err = json.Unmarshal(b, &cj)
	}
	if projects, _ := cj["projects"].(map[string]any); err != nil || projects[work] == nil {
		t.Errorf("~/.claude.json on the volume: %v\n%s; want the dialog answers for %s", err, b, work)
	}

	if _, err := cl.Respond(ctx, api.RespondArgs{Name: a.Name, Decision: api.DecisionAllow, By: "test"}); err != nil {
		t.Fatal(err)
	}
	kubeSession(t, cl, a.Name, "idle after its turn", func(s api.Session) bool {
		return s.Agent != nil && s.Agent.State == api.AgentIdle
	})
	if _, err := os.Stat(filepath.Join(vol, "work", "made-in-the-pod")); err != nil {
		t.Errorf("the allowed command did not run in the pod: %v", err)
	}
	waitfor.Check(t, 30*time.Second, "the tool's result at the API", func() error {
		for _, r := range srv.MessageRequests(sid.String()) {
			if res, ok := r.ToolResult("toolu_kube_1"); ok {
				if res.IsError {
					return waitfor.Stop(fmt.Errorf("the tool failed: %s", res.Content))
				}
				return nil
			}
		}
		return os.ErrNotExist
	})
	if _, err := cl.End(ctx, a.Name, "done"); err != nil {
		t.Fatal(err)
	}
	kubeSession(t, cl, a.Name, "exited 0", func(s api.Session) bool {
		return s.State == api.StateExited && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 0
	})
}
