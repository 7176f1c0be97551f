package activation

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// realWorkerImage is the worker image TestKubeRealNode builds and loads.
const realWorkerImage = "legion.test/legion-worker:realnode"

// TestKubeRealNode: a cluster session on a real node (a real kubelet with
// containerd and runc on this machine: kubetest.Options.RealNode), not a
// simulated one. The worker image is `legion-kube image`'s (no agent CLI;
// the scripted agent is the image's legion, built with the demo tag),
// loaded into the node's containerd without a registry. The helper spawns
// the session (engine kubernetes, the team's image that one); its pod
// runs on the kubelet, hardened, with the claim bound to a
// hostPath PV. The agent goes stale, the worker ends it and exits 1, the
// Job starts a new pod on the same volume whose worker resumes the same
// conversation; attach through the API server (exec, served by the
// kubelet) shows it; logs come from the kubelet; end completes the Job.
// Beside it, an agent that cannot start (a program that is not there):
// its worker exits 78 in its real pod and the Job fails for good, with
// the cause, on its first pod. And input: a line typed on a terminal
// attached through the API server (exec, served by the kubelet) reaches
// the agent waiting at its prompt in its pod, which takes it as its next
// prompt (its answer shows on the terminal; the prompt is in its session
// file on the volume). Then the node is lost and comes back (its Node
// deleted, its pods with it; the kubelet registers again): the Job's
// new pod resumes the same conversation there, the restart not counted.
func TestKubeRealNode(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1, RealNode: true})
	legion, kube := sdtest.LegionBinary(t), sdtest.KubeBinary(t)
	tar := filepath.Join(t.TempDir(), "worker.tar")
	if out, err := exec.Command(kube, "image", "--out", tar, "--cli", "", "--bin", filepath.Dir(legion), "--name", realWorkerImage).CombinedOutput(); err != nil {
		t.Fatalf("legion-kube image: %v: %s", err, out)
	}
	c.LoadImage(t, tar)
	const ns = "legion-real"
	c.RealNamespace(t, ns, 3, 1000)
	ip := startInProcess(t, true, Options{KubeBinary: kube})
	cl := ip.client(t)
	ctx := t.Context()

	a := staleThenResumed(c, ns, "/usr/local/bin/legion") // the image's
	a.Kubernetes.Image = realWorkerImage
	if _, err := cl.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Beside it, an agent that cannot start: its worker exits 78 in a
	// real pod and the Job fails for good at once, on its first pod.
	missing := kubeLaunch(c, ns, "DEMO-10", "implement")
	missing.Kubernetes.Image = realWorkerImage
	missing.Argv, missing.Role, missing.Cwd = []string{"/nonexistent/agent"}, roleCommand, wire.VolumeMount
	if _, err := cl.Spawn(ctx, missing); err != nil {
		t.Fatal(err)
	}
	// Beside them, an agent that answers what is typed at its prompt.
	typed := kubeLaunch(c, ns, "DEMO-11", "implement")
	typed.Kubernetes.Image = realWorkerImage
	typed.Cwd = wire.VolumeMount
	typed.Argv = []string{"/usr/local/bin/legion", "scripted-agent", "--session-id", typed.ID, "go"}
	typed.Watch = claudecode.SessionFile(wire.HomeDir, typed.Cwd, uuid.MustParse(typed.ID))
	typed.StaleAfter, typed.StartupGrace = api.Duration(10*time.Minute), new(api.Duration(0))
	typed.Env = []string{"LEGION_SCRIPT=" + `
if-prompt go say ready for input
if-prompt typed say the agent heard: $PROMPT_TITLE
`}
	if _, err := cl.Spawn(ctx, typed); err != nil {
		t.Fatal(err)
	}
	s := kubeSession(t, cl, a.Name, "running again after its stale run", func(s api.Session) bool {
		return s.State == api.StateRunning && s.Restarts == 1
	})
	if s.Exit == nil || s.Exit.Code == nil || *s.Exit.Code != 1 {
		t.Errorf("the first run's exit = %+v; want code 1 (the worker ended its stale agent)", s.Exit)
	}
	pods := podsOf(t, c, ns, a.ID)
	if len(pods) != 2 || pods[0].Status.Phase != corev1.PodFailed {
		t.Fatalf("pods %d, the first %s; want 2, the first failed", len(pods), pods[0].Status.Phase)
	}
	for _, p := range pods {
		if p.Spec.NodeName != kubetest.RealNodeName {
			t.Errorf("pod %s ran on %q; want the real node %s", p.Name, p.Spec.NodeName, kubetest.RealNodeName)
		}
	}

	// The registry on the volume (a hostPath PV on this machine):
	// run 2 resumed, run 1 ended by the worker's own watchdog.
	claim := pods[1].Spec.Volumes[0].PersistentVolumeClaim.ClaimName
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Attach through the API server and the kubelet: the resumed agent's screen.
	checkResumedOnVolume(t, ctx, cl, pv.Spec.HostPath.Path, a.ID, a.Name)

	// Status, and the transcript through exec (served by the kubelet).
	if st, err := cl.Status(ctx, a.Name); err != nil || st.State != api.StateRunning {
		t.Errorf("Status = %+v, %v; want running", st, err)
	}
	var logs strings.Builder
	if _, err := cl.Logs(ctx, api.LogsArgs{Name: a.Name}, &logs); err != nil {
		t.Errorf("Logs: %v", err)
	} else if !strings.Contains(logs.String(), "resumed the same conversation") {
		t.Errorf("Logs of %s (the transcript, read through exec) = %q; want the resumed agent's words", a.Name, logs.String())
	}

	ms := kubeSession(t, cl, missing.Name, "failed for good", func(s api.Session) bool {
		return s.State == api.StateFailed && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 78
	})
	if !strings.Contains(ms.Cause, "cannot be started") {
		t.Errorf("cause %q; want the agent that cannot be started", ms.Cause)
	}
	mp := podsOf(t, c, ns, missing.ID)
	if len(mp) != 1 || mp[0].Spec.NodeName != kubetest.RealNodeName {
		t.Errorf("the agent that cannot start had %d pods (the first on %q); want 1 (no restart), on the real node", len(mp), mp[0].Spec.NodeName)
	}
	typedOnRealNode(t, cl, c, ns, typed)

	// The node is lost (its Node deleted, its pods with it: the kubelet
	// ends their containers) and a node of the same name comes back: the
	// Job's new pod runs there and resumes the same conversation from the
	// issue's volume, and a lost node is not the agent's failure.
	old := map[string]bool{}
	for _, p := range podsOf(t, c, ns, a.ID) {
		old[p.Name] = true
	}
	c.LoseRealNode(t)
	s = kubeSession(t, cl, a.Name, "running on the node that came back", func(s api.Session) bool {
		return s.State == api.StateRunning && s.Node == kubetest.RealNodeName
	})
	if s.Restarts != 1 {
		t.Errorf("restarts %d after a lost node; want 1 (a lost node is not the agent's failure)", s.Restarts)
	}
	pods = podsOf(t, c, ns, a.ID)
	if len(pods) != 1 || old[pods[0].Name] {
		t.Fatalf("pods after the lost node: %d (the first %s, of the lost ones: %t); want a new one", len(pods), pods[0].Name, old[pods[0].Name])
	}
	regPath := filepath.Join(pv.Spec.HostPath.Path, "state", "registry", a.ID+".json")
	waitfor.Check(t, 90*time.Second, "run 3 resumed on the new pod, in the registry on the volume", func() error {
		r, err := proto.ReadRegistry(regPath)
		if err != nil {
			return err
		}
		if r.Run != 3 || r.ArgvKind != proto.ArgvResume {
			return fmt.Errorf("registry %+v", r)
		}
		return nil
	})

	if _, err := cl.End(ctx, a.Name, "its work is done"); err != nil {
		t.Fatalf("End: %v", err)
	}
	kubeSession(t, cl, a.Name, "succeeded", func(s api.Session) bool {
		return s.State == api.StateExited && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 0
	})

	// The agent that cannot start failed for good, and says so after its
	// pod went with the lost node (from the Job's condition).
	ms = kubeSession(t, cl, missing.Name, "still failed for good, its pod gone", func(s api.Session) bool {
		return s.State == api.StateFailed && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 78
	})
	if len(podsOf(t, c, ns, missing.ID)) != 0 || !strings.Contains(ms.Cause, "cannot be started") {
		t.Errorf("the agent that cannot start, after the lost node: %+v; want no pod left and the cause kept", ms)
	}
}

// typedOnRealNode attaches to session a on the real node through the API
// server, waits for its agent's words at its prompt, types a line and checks that the
// agent took it as its prompt: its answer on the terminal, the prompt in
// its session file on the volume (a hostPath PV here).
func typedOnRealNode(t *testing.T, cl *api.Client, c *kubetest.Cluster, ns string, a api.SpawnArgs) {
	t.Helper()
	ctx := t.Context()
	kubeSession(t, cl, a.Name, "running", func(s api.Session) bool { return s.State == api.StateRunning })
	wc, _ := attachFromStart(t, cl, a.Name)
	defer wc.Close()
	var out strings.Builder
	readAttached(t, wc, &out, "ready for input", 60*time.Second)
	if err := wc.Input(ctx, []byte("typed on a real node\r")); err != nil {
		t.Fatalf("input to %s: %v", a.Name, err)
	}
	readAttached(t, wc, &out, "the agent heard: typed on a real node", 60*time.Second)
	pods := podsOf(t, c, ns, a.ID)
	if len(pods) != 1 || pods[0].Spec.NodeName != kubetest.RealNodeName {
		t.Fatalf("%d pods of %s (the first on %q); want one, on the real node", len(pods), a.Name, pods[0].Spec.NodeName)
	}
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wire.VolumeMount, a.Watch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, rel))
	if err != nil || !strings.Contains(string(b), "typed on a real node") {
		t.Errorf("the session file on the volume: %v\n%s\nwant the typed prompt in it", err, b)
	}
	if _, err := cl.End(ctx, a.Name, "its work is done"); err != nil {
		t.Fatalf("End %s: %v", a.Name, err)
	}
}

// TestKubeRealNodeClaude: the real Claude Code in a cluster session's pod
// on a real node. The worker image packs the pinned CLI (`legion-kube
// image --cli claude`); the fake Anthropic API (anthropictest) listens on
// the node's IP, which the pod reaches from the pod network. HOME is on
// the volume, with ~/.claude.json (onboarding done, /legion
// trusted) written there before the pod starts. The CLI answers the
// scripted turn: the fake API saw the session's request, the session
// file on the volume holds the answer, and end completes the Job.
func TestKubeRealNodeClaude(t *testing.T) {
	claudetest.Binary(t) // skips without the CLI (fails with CI=true)
	c := kubetest.Start(t, kubetest.Options{Nodes: -1, RealNode: true})
	legion, kube := sdtest.LegionBinary(t), sdtest.KubeBinary(t)
	const image = "legion.test/legion-worker:realnode-claude"
	tar := filepath.Join(t.TempDir(), "worker.tar")
	if out, err := exec.Command(kube, "image", "--out", tar, "--cli", "claude", "--bin", filepath.Dir(legion), "--name", image).CombinedOutput(); err != nil {
		t.Fatalf("legion-kube image --cli claude: %v: %s", err, out)
	}
	c.LoadImage(t, tar)
	l, err := net.Listen("tcp", net.JoinHostPort(kubetest.RealNodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	fake := anthropictest.NewServerOn(t, l)
	fake.Key = claudetest.Token

	const ns = "legion-real-claude"
	c.RealNamespace(t, ns, 1, 1000)
	home := filepath.Join(c.RealVolumeDir(ns, 0), strings.TrimPrefix(wire.HomeDir, wire.VolumeMount+"/"))
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := claudetest.WriteClaudeJSON(filepath.Join(home, ".claude.json"), wire.VolumeMount); err != nil {
		t.Fatal(err)
	}
	if err := filepath.WalkDir(home, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, 1000, 1000)
	}); err != nil {
		t.Fatal(err)
	}

	ip := startInProcess(t, true, Options{KubeBinary: kube})
	cl := ip.client(t)
	ctx := t.Context()
	a := kubeLaunch(c, ns, "DEMO-11", "implement")
	a.Kubernetes.Image = image
	a.Cwd, a.Agent = wire.VolumeMount, proto.AgentClaude
	const answer = "The lanterns are lit: forty-two of them, all green."
	fake.Script(a.ID, anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(answer)}})
	a.Argv = []string{"claude", "--session-id", a.ID, "light the lanterns"}
	a.ArgvResume = []string{"claude", "--resume", a.ID, "go on"}
	a.Watch = claudecode.SessionFile(wire.HomeDir, a.Cwd, uuid.MustParse(a.ID))
	a.StaleAfter = api.Duration(10 * time.Minute)
	a.StartupGrace = new(api.Duration(90 * time.Second))
	a.Env = []string{"ANTHROPIC_BASE_URL=" + fake.URL, "ANTHROPIC_AUTH_TOKEN=" + claudetest.Token,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "TERM=xterm-256color"}
	if _, err := cl.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	sessionFile := claudecode.SessionFile(home, a.Cwd, uuid.MustParse(a.ID))
	if err := waitfor.Until(3*time.Minute, "the CLI's answer in its session file on the volume", func() error {
		b, err := os.ReadFile(sessionFile)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), answer) {
			return fmt.Errorf("%s has no answer yet", sessionFile)
		}
		return nil
	}); err != nil {
		var screen strings.Builder
		_, lerr := cl.Logs(ctx, api.LogsArgs{Name: a.Name, Tail: 4000}, &screen)
		b, _ := os.ReadFile(sessionFile)
		t.Fatalf("%v\nthe fake API saw %d requests; the session file:\n%s\nthe transcript's end (%v):\n%q", err, len(fake.Requests()), b, lerr, screen.String())
	}
	if n := len(fake.MessageRequests(a.ID)); n == 0 {
		t.Errorf("the fake API saw no request of session %s", a.ID)
	}
	for _, p := range podsOf(t, c, ns, a.ID) {
		if p.Spec.NodeName != kubetest.RealNodeName {
			t.Errorf("pod %s ran on %q; want the real node %s", p.Name, p.Spec.NodeName, kubetest.RealNodeName)
		}
	}
	if _, err := cl.End(ctx, a.Name, "its work is done"); err != nil {
		t.Fatalf("End: %v", err)
	}
	kubeSession(t, cl, a.Name, "succeeded", func(s api.Session) bool {
		return s.State == api.StateExited && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 0
	})
}
