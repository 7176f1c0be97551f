package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/linear/lineartest"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/followmodel"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// The namespace of a kubeTeam, and its team's Secret (kubernetes.secret).
const (
	kubeNS     = "legion-demo"
	kubeSecret = "legion-demo"
)

// kubeTeam is a Linear team (the local fake of Linear's API, team key
// ENG) with engine = "kubernetes" on a real control plane whose pods run
// (kwok's simulated nodes, runc: not a real node), its repository the
// workspace's main served bare over git's smart HTTP (bare, pushes
// allowed), its Linear key in the team's Secret, and its controller
// legion@demo under a private user manager, not started yet.
type kubeTeam struct {
	*env
	c    *kubetest.Cluster
	srv  *lineartest.Server
	bare string
}

// startKubeTeam starts a kubeTeam with o, agentLines more TOML for the
// team's table (its agent), and binds more directories bound into every
// pod (an agent CLI's, kubetest.PodCLIDir).
func startKubeTeam(t *testing.T, o teamOptions, agentLines string, binds ...string) *kubeTeam {
	bin := sdtest.LegionBinary(t)
	binDir := filepath.Dir(bin)
	if err := os.Chmod(binDir, 0o755); err != nil { // the pod's user runs them
		t.Fatal(err)
	}
	path := binDir + ":/usr/bin:/bin"
	c := kubetest.Start(t, kubetest.Options{RunPods: true, PodBinds: append([]string{binDir}, binds...), PodEnv: []string{"PATH=" + path},
		ExecEnv: map[string]string{"PATH": path}})
	const ns = kubeNS
	c.Namespace(t, ns, 2)
	srv := lineartest.NewServer(t, linearKey, "ENG")
	if _, err := c.Client.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeSecret},
		Data:       map[string][]byte{team.PodLinearKey: []byte(linearKey + "\n")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gitRoot := t.TempDir()
	repoURL := kubetest.ServeGit(t, gitRoot, nil) + "/demo.git"
	keyFile := filepath.Join(t.TempDir(), "linear-key")
	if err := os.WriteFile(keyFile, []byte(linearKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.extra += agentLines + fmt.Sprintf(`tracker = "linear"
linear.team_key = "ENG"
linear.credentials_file = %q
linear.api_url = %q
engine = "kubernetes"
kubernetes.kubeconfig = %q
kubernetes.namespace = %q
kubernetes.image = "legion-worker:test"
kubernetes.storage_class = %q
kubernetes.storage = "1Gi"
kubernetes.memory_request = "64Mi"
kubernetes.cpu_request = "100m"
kubernetes.secret = "legion-demo"
kubernetes.repository = %q
kubernetes.bin_dir = %q
`, keyFile, srv.URL, c.Kubeconfig, ns, kubetest.StorageClass, repoURL, binDir)
	e := start(t, "", o)
	sdtest.KubeBinary(t) // beside legion, where the helper finds it

	// The team's repository: the workspace's main, served bare.
	bare := filepath.Join(gitRoot, "demo.git")
	e.git(gitRoot, "clone", "-q", "--bare", e.ws, bare)
	e.git(bare, "config", "http.receivepack", "true")

	r := &chaosRun{env: e, srv: srv}
	r.lookupFromFake()
	return &kubeTeam{env: e, c: c, srv: srv, bare: bare}
}

// TestKubeTodoToDone: a Linear team with engine = "kubernetes" runs an
// issue from Todo to Done on a real control plane, its controller
// (legion@demo, under a private user manager) on this machine. Each phase
// is a Job whose pod (kwok's simulated node; the test runs its container
// with runc: not a real node) clones the team's repository onto the
// issue's volume before the agent starts, with a legion.toml of its own
// and the Linear key from the team's Secret; the agent's tracker
// commands reach Linear from the pod, and the finisher merges into the
// repository and pushes there. The controller is killed -9 right after
// a dispatch and goes on after systemd restarts it: no phase runs twice.
func TestKubeTodoToDone(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	// The scripted agent's script travels in its argv: the pod sees none
	// of this machine's files but the programs. A custom agent has no
	// hooks: it ends its phase by exiting, as a one-shot agent does.
	script := strings.ReplaceAll(planScript+implementScript+implementDone+approveScript+retroFinishScript+"exit 0\n", "@LEGION@", bin)
	// A custom agent gets its prompt and no session id (a retro starts
	// anew, told what its phase is).
	argv := fmt.Sprintf(`agent.new = ["/usr/bin/env", %s, %q, "scripted-agent", "{prompt}"]`, strconv.Quote("LEGION_SCRIPT="+script), bin)
	k := startKubeTeam(t, teamOptions{wipLimit: 1, staleAfter: "20s", argv: argv}, "agent.kind = \"custom\"\n")
	e, srv, bare := k.env, k.srv, k.bare
	is := srv.AddIssue("Write a file", "Todo")
	id := is.Identifier
	// About 20 s on 2 idle cores, 90 to 160 s with the load average at
	// 25; the bound is only generous. (A failure logs each pod's phase,
	// conditions, events, log and runc state: kubetest.Cluster.Describe.)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	e.startController()

	// The controller is killed (-9) as soon as it has dispatched the
	// implementer, often before its tracker changes (the issue still
	// Todo with the planner's worker-done), and the implementer may
	// complete before systemd has the controller back: the next one
	// finishes that dispatch from its record (controller.Dispatched)
	// instead of running the implementer again.
	ctl, _ := unitname.ControllerUnit(teamName)
	e.poll(ctx, "the implementer dispatched", func() (bool, string) {
		s, ok := e.session(ctx, id, controller.ModeImplement)
		return ok, fmt.Sprintf("%+v", s)
	})
	if out, err := e.sd.Systemctl(t, "kill", "--signal=KILL", ctl); err != nil {
		t.Fatalf("kill -9 %s: %v: %s", ctl, err, out)
	}

	e.poll(ctx, id+" Done", func() (bool, string) {
		is := e.issue(ctx, id)
		var live []string
		for _, s := range e.sessions(ctx) {
			live = append(live, fmt.Sprintf("%s=%s(%s)", s.Name, s.State, s.Cause))
		}
		return is.Status == controller.StatusDone, fmt.Sprintf("%s %v; sessions %s", is.Status, is.Labels, strings.Join(live, " "))
	})
	if got := e.git(bare, "show", "main:"+id+".txt"); !strings.Contains(got, "impl "+id) {
		t.Errorf("the repository's main:%s = %q; want the implementer's file", id+".txt", got)
	}
	// By the workspace's git identity: the pods have none of their own.
	if by := strings.TrimSpace(e.git(bare, "log", "-1", "--format=%an <%ae>", "main")); by != "legion-test <legion-test@example.com>" {
		t.Errorf("the merge on the repository's main is by %q; want the workspace's user.name and user.email", by)
	}
	if n := strings.Count(e.git(bare, "log", "--format=%s", "main"), "Merge legion/"+id); n != 1 {
		t.Errorf("the repository's main merged legion/%s %d times; want once", id, n)
	}
	done := srv.Issue(id)
	srv.Lock()
	var comments []string
	for _, c := range done.Comments {
		comments = append(comments, c.Body)
	}
	srv.Unlock()
	if n := strings.Count(strings.Join(comments, "\n"), "plan: write the file"); n != 1 {
		t.Errorf("comments on %s = %q; want the planner's once, written from its pod", id, comments)
	}

	// Every phase ran as a Job on the cluster, none on this machine.
	modes := map[string]bool{}
	for _, s := range e.sessions(ctx) {
		if s.Issue != id {
			continue
		}
		if s.Engine != api.EngineKubernetes || s.Restarts != 0 {
			t.Errorf("session %s runs on %q with %d restarts; want kubernetes, none", s.Name, s.Engine, s.Restarts)
		}
		modes[s.Mode] = true
	}
	for _, m := range []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeFinish} {
		if !modes[string(m)] {
			t.Errorf("no session of %s in mode %s; want every phase on the cluster (have %v)", id, m, modes)
		}
	}
	if ws := e.workers(ctx); len(ws) != 0 {
		t.Errorf("worker units on this machine: %v; want none", ws)
	}
}

// kubeKind is an agent kind for TestKubeKindTodoToDone: its real CLI
// and, for a user of it, the fake of its model API in follow mode: user
// writes the user's own config of the CLI under home (the controller's
// machine's; the pod gets it from the controller's plan,
// agent.UserConfiger) and returns what agent.env must hold (the key and,
// where the CLI reads it from the environment, the fake's address) and
// what the fake was asked, for a failure's log.
type kubeKind struct {
	kind config.AgentKind
	cli  func(testing.TB) string
	user func(t *testing.T, home string) (env []string, requests func() []string)
	// key is the variable of env that holds the model's API key: it goes
	// into the team's Secret (kubernetes.secret_env), not agent.env.
	key string
}

var kubeKinds = []kubeKind{
	{config.AgentClaude, claudetest.Binary, func(t *testing.T, home string) ([]string, func() []string) {
		model := anthropictest.NewServer(t)
		model.Key = claudetest.Token
		model.Follow(followmodel.Traits{})
		return []string{"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=" + claudetest.Token, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}, func() (out []string) {
			for _, r := range model.MessageRequests("") {
				out = append(out, fmt.Sprintf("%s session %s: last user text %q%s", r.Time.Format("15:04:05.000"), r.Session, clip(r.LastUserText(), 300), toolResults(r)))
			}
			return out
		}
	}, "ANTHROPIC_API_KEY"},
	{config.AgentCodex, codextest.Binary, func(t *testing.T, home string) ([]string, func() []string) {
		model := openaitest.NewServer(t)
		model.Follow(followmodel.Traits{})
		if err := model.WriteUserConfig(home); err != nil {
			t.Fatal(err)
		}
		return []string{openaitest.KeyEnv + "=" + openaitest.Key}, openaiRequests(model)
	}, openaitest.KeyEnv},
	{config.AgentGemini, geminitest.Binary, func(t *testing.T, home string) ([]string, func() []string) {
		model := geminitest.NewServer(t)
		model.Follow(followmodel.Traits{})
		if err := geminitest.WriteUserSettings(home); err != nil {
			t.Fatal(err)
		}
		return model.Env(), func() (out []string) {
			for _, r := range model.Requests() {
				out = append(out, fmt.Sprintf("%s: turn %+v", r.Time.Format("15:04:05.000"), r.Turn))
			}
			return out
		}
	}, "GEMINI_API_KEY"},
	{config.AgentOpencode, opencodetest.Binary, func(t *testing.T, home string) ([]string, func() []string) {
		model := openaitest.NewServer(t)
		model.Follow(followmodel.Traits{})
		// The user's opencode.json only: the plugin package a first
		// start installs (opencode FACTS O4a) is not shipped to the pod
		// (64 MB); offline, that install fails and the start goes on.
		if err := model.WriteOpencodeUserConfig(home); err != nil {
			t.Fatal(err)
		}
		return []string{openaitest.KeyEnv + "=" + openaitest.Key}, openaiRequests(model)
	}, openaitest.KeyEnv},
}

// openaiRequests lists what model was asked, for a failure's log.
func openaiRequests(model *openaitest.Server) func() []string {
	return func() (out []string) {
		for _, r := range model.Requests() {
			out = append(out, fmt.Sprintf("%s title %v: turn %+v", r.Time.Format("15:04:05.000"), r.Title, r.Turn))
		}
		return out
	}
}

// TestKubeKindTodoToDone: a team of each agent kind from Todo to Done on
// a real control plane, under its controller legion@demo on this
// machine: each phase a Job whose pod (kwok's simulated node, runc: not a
// real node) runs the kind's real CLI, its files prepared in the pod from
// the user's own config on this machine (shipped in the controller's
// plan), against the local fake of its model API in follow mode (the
// model knows only what the CLI sent it and follows the phase's
// instructions in the prompt, as in TestFollow). The team is what
// `legion team add --kind KIND` writes (the kind's default argv and the
// default policy) with the cluster's keys; the model's key (and, for
// Claude Code and Gemini CLI, its address) reach the agent through
// agent.env, in the session's spec Secret. In a pod the default policy
// is allowlist (Landlock is drawn on a machine only), so a CLI may ask
// before commands its rules do not allow: each wait is escalated to the
// tracker and answered there as a person would ("approve"), and the
// answer reaches the agent in its pod through the API server. The issue
// gets one plan, two reviews (the strict reviewer asks for changes
// once), one retro, and its branch merged into the repository's main by
// the finisher's pod.
func TestKubeKindTodoToDone(t *testing.T) {
	for _, k := range kubeKinds {
		t.Run(string(k.kind), func(t *testing.T) { kubeKindTodoToDone(t, k) })
	}
}

func kubeKindTodoToDone(t *testing.T, k kubeKind) {
	cli := kubetest.PodCLI(t, k.cli(t))
	argv, resume, pinned := config.KindArgv(k.kind)
	quoted := func(argv []string) string {
		var q []string
		for _, a := range append([]string{cli}, argv[1:]...) {
			q = append(q, strconv.Quote(a))
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	// The user's config goes into the controller's home once the
	// private manager exists; agent.env must be in legion.toml first.
	home := t.TempDir()
	env, requests := k.user(t, home)
	var table []string
	var key string
	for _, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		if name == k.key {
			key = v
			continue
		}
		table = append(table, fmt.Sprintf("%s = %q", name, v))
	}
	if key == "" {
		t.Fatalf("the fake's environment %q has no %s", env, k.key)
	}
	// The key in the team's Secret, read by the worker in each pod.
	const keyName = "model-api-key"
	agentLines := fmt.Sprintf("agent.kind = %q\nagent.env = { %s }\nkubernetes.secret_env = { %s = %q }\n", k.kind, strings.Join(table, ", "), k.key, keyName)
	o := teamOptions{wipLimit: 1, staleAfter: "2m", idleGrace: "2s"}
	if pinned {
		o.argv = fmt.Sprintf("agent.new = %s\nagent.resume = %s", quoted(argv), quoted(resume))
	} else {
		o.claude = cli // the defaults' argv (Claude Code's), its program replaced
	}
	kt := startKubeTeam(t, o, agentLines, kubetest.PodCLIDir(cli))
	e, srv := kt.env, kt.srv
	sec, err := kt.c.Client.CoreV1().Secrets(kubeNS).Get(t.Context(), kubeSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data[keyName] = []byte(key + "\n")
	if _, err := kt.c.Client.CoreV1().Secrets(kubeNS).Update(t.Context(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", home+"/.", e.sd.Home).CombinedOutput(); err != nil {
		t.Fatalf("the user's config into %s: %v\n%s", e.sd.Home, err, out)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, r := range requests() {
			t.Logf("API request %s", r)
		}
	})
	is := srv.AddIssue("Greet the user", "Todo")
	id := is.Identifier
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	e.startController()

	// A person answers each wait in Linear: "approve" for a permission,
	// "Answer: hi" for anything else, and user-feedback-given.
	fb := srv.AddLabel(controller.LabelFeedbackGiven, srv.TeamID)
	answered, permissions, others := 0, 0, 0
	e.poll(ctx, id+" Done", func() (bool, string) {
		is := srv.Issue(id)
		labels := srv.LabelNames(is)
		if slices.Contains(labels, controller.LabelInputNeeded) && !slices.Contains(labels, controller.LabelFeedbackGiven) {
			esc := linearEscalations(srv, is)
			if len(esc) > answered {
				answered = len(esc)
				text := "Answer: hi"
				if strings.Contains(esc[len(esc)-1], "asks permission") {
					text, permissions = "approve", permissions+1
				} else {
					others++
				}
				t.Logf("answering %s as a person with %q: %s", id, text, clip(esc[len(esc)-1], 300))
				srv.Comment(is, "Grace Hopper", text)
				srv.Lock()
				is.LabelIDs = append(is.LabelIDs, fb.ID)
				srv.Unlock()
			}
		}
		if answered > 12 {
			t.Fatalf("answered %d waits and the run goes on asking", answered)
		}
		var live []string
		for _, s := range e.sessions(ctx) {
			live = append(live, fmt.Sprintf("%s=%s(%s)", s.Name, s.State, s.Cause))
		}
		return srv.StateName(is.StateID) == "Done", fmt.Sprintf("%s %v; sessions %s", srv.StateName(is.StateID), labels, strings.Join(live, " "))
	})
	t.Logf("%s Done on the cluster in %s: %d permission waits and %d other waits answered", id, time.Since(start).Round(time.Second), permissions, others)
	if others != 0 {
		t.Errorf("%d waits other than permissions; want none (the issue asks nothing)", others)
	}

	done := srv.Issue(id)
	srv.Lock()
	count := map[string]int{}
	for _, c := range done.Comments {
		for _, p := range []string{"Plan: ", "Review: ", "Retro: "} {
			if strings.HasPrefix(c.Body, p) {
				count[p]++
			}
		}
	}
	srv.Unlock()
	if count["Plan: "] != 1 || count["Review: "] != 2 || count["Retro: "] != 1 {
		t.Errorf("%s has %v reports; want one plan, two reviews (changes requested, then approved), one retro", id, count)
	}
	log := e.git(kt.bare, "log", "--format=%s", "main")
	if n := strings.Count(log, "Merge legion/"+id); n != 1 || !strings.Contains(log, id+": retro:") {
		t.Errorf("the repository's main:\n%s\nwant legion/%s merged once, with its retro commit", log, id)
	}
	for _, s := range e.sessions(ctx) {
		if s.Issue == id && s.Engine != api.EngineKubernetes {
			t.Errorf("session %s runs on %q; want kubernetes", s.Name, s.Engine)
		}
	}
	if ws := e.workers(ctx); len(ws) != 0 {
		t.Errorf("worker units on this machine: %v; want none", ws)
	}
	// The key is in no Job and no session's spec Secret: only in the
	// team's Secret, read in the pod.
	jobs, err := kt.c.Client.BatchV1().Jobs(kubeNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := kt.c.Client.CoreV1().Secrets(kubeNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), key) {
		t.Errorf("the model's key is in a Job's spec")
	}
	specs := 0
	for _, sec := range secrets.Items {
		if sec.Name == kubeSecret {
			continue
		}
		specs++
		for name, data := range sec.Data {
			if strings.Contains(string(data), key) {
				t.Errorf("the model's key is in Secret %s's %s", sec.Name, name)
			}
		}
	}
	if specs == 0 {
		t.Errorf("no session's spec Secret left to look at")
	}
	if len(jobs.Items) == 0 {
		t.Errorf("no Job left to look at")
	}
}
