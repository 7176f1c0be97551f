package activation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestKubeClaude: the real Claude Code runs in a pod (the real worker,
// runc on a kwok node, against the local fake of the Anthropic API) with
// the files its kind prepares made in the pod by `legion agent prepare`
// from the controller's plan (agent.PlanForPod, shipped in the spec
// Secret): it starts with no dialog (its settings and ~/.claude.json's
// answers are on the volume), its hooks reach the worker in the
// pod, and the helper follows the worker through the API server: the
// agent's wait for a person's permission shows in the session's state,
// a person's allow reaches it, and its turn's end shows as idle.
func TestKubeClaude(t *testing.T) {
	legion := sdtest.LegionBinary(t)
	binDir := filepath.Dir(legion)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	claudeBin := kubetest.PodCLI(t, claudetest.Binary(t))
	path := binDir + ":/usr/bin:/bin"
	c := kubetest.Start(t, kubetest.Options{RunPods: true, PodBinds: []string{binDir, kubetest.PodCLIDir(claudeBin)}, PodEnv: []string{"PATH=" + path},
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
	// The worktree first (the controller's `legion worktree ensure`),
	// then the agent's files.
	sid := podAgent(t, &a, cfg, "Make the file.", legion,
		[]string{"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_AUTH_TOKEN=" + claudetest.Token, "CLAUDE_CODE_MAX_RETRIES=0"}, "",
		[]string{"/bin/mkdir", "-p", work})

	const made = wire.WorkDir + "/made-in-the-pod"
	srv.Script(sid,
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
		for _, r := range srv.MessageRequests(sid) {
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
