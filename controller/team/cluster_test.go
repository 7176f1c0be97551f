package team

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
)

// clusterTeam is a Linear team on a cluster, its legion.toml written to
// a file (PodConfig reads it), with what of this machine must not reach
// its pods: notifications, the webhook's secret, instruction templates.
func clusterTeam(t *testing.T, extra string) *Team {
	t.Helper()
	tm := testTeam(t)
	dir := t.TempDir()
	instr := filepath.Join(dir, "instructions")
	if err := os.Mkdir(instr, 0o700); err != nil {
		t.Fatal(err)
	}
	text := `[helper]
log_level = "debug"

[defaults]
wip_limit = 2
notify.desktop = true

[teams.demo]
id = "6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + tm.Workspace + `"
tracker = "linear"
linear.team_key = "ENG"
linear.credentials_file = "` + filepath.Join(dir, "linear-key") + `"
linear.api_url = "http://127.0.0.1:1/graphql"
github.webhook_secret_file = "` + filepath.Join(dir, "hook-secret") + `"
github.repo = "acme/demo"
notify.ntfy_url = "https://ntfy.example/legion-demo"
agent.kind = "custom"
agent.instructions_dir = "` + instr + `"
agent.new = ["my-agent", "{prompt}"]
engine = "kubernetes"
kubernetes.namespace = "legion-demo"
kubernetes.image = "registry.example/legion-worker:1"
kubernetes.repository = "https://git.example/demo.git"
kubernetes.bin_dir = "/opt/legion"
` + extra
	if err := os.WriteFile(filepath.Join(dir, "linear-key"), []byte("lin_api_TEST\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "legion.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := cfg.Team("demo")
	c, err := Open(ct, path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPlanOnCluster(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null") // this machine's identity is not the workspace's
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	tm := clusterTeam(t, "kubernetes.secret = \"legion-demo-agents\"\nkubernetes.secret_env = { MODEL_KEY = \"model-key\" }\n")
	if _, err := tm.PlanDispatch(t.Context(), "ENG-7", "implement", t.TempDir()); err == nil || !strings.Contains(err.Error(), "need a git identity") {
		t.Errorf("PlanDispatch with no git identity: %v; want one asked for", err)
	}
	for k, v := range map[string]string{"user.name": "Ada", "user.email": "ada@example.com"} {
		if out, err := exec.Command("git", "-C", tm.Workspace, "config", k, v).CombinedOutput(); err != nil {
			t.Fatalf("git config %s: %v: %s", k, err, out)
		}
	}
	d, err := tm.PlanDispatch(t.Context(), "ENG-7", "implement", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wantCwd := "/legion/home/.local/state/legion/worktrees/" + tm.ShortID() + "/ENG-7"
	if d.Cwd != wantCwd || d.Kubernetes == nil || d.Kubernetes.Namespace != "legion-demo" {
		t.Errorf("cwd %q, target %+v; want %s on the team's cluster", d.Cwd, d.Kubernetes, wantCwd)
	}
	if _, err := os.Stat(tm.Worktrees.Path("ENG-7")); err == nil {
		t.Error("a dispatch to the cluster made a worktree on this machine")
	}
	wantPrep := [][]string{
		{"/opt/legion/legion", "worktree", "clone", "https://git.example/demo.git", "/legion/repo"},
		{"/opt/legion/legion", "worktree", "ensure", "demo", "ENG-7"},
	}
	if !slices.EqualFunc(d.Prepare, wantPrep, slices.Equal) {
		t.Errorf("prepare %q; want %q", d.Prepare, wantPrep)
	}
	for _, kv := range []string{"LEGION_CONFIG=/run/legion-spec/legion.toml", "LEGION_BIN=/opt/legion/legion", "LEGION_ISSUE=ENG-7",
		"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com"} {
		if !slices.Contains(d.Env, kv) {
			t.Errorf("env %q lacks %s", d.Env, kv)
		}
	}
	if !strings.Contains(d.Instructions, "/opt/legion/legion issue") || strings.Contains(d.Instructions, tm.Workspace) {
		t.Errorf("instructions name legion or the workspace wrongly (want the pod's /opt/legion/legion, never %s):\n%s", tm.Workspace, d.Instructions)
	}
	a := tm.DispatchLaunch(d, config.Worker{StartupGrace: time.Minute})
	if want := map[string]string{"MODEL_KEY": "/run/secrets/legion/model-key"}; !maps.Equal(a.EnvFiles, want) {
		t.Errorf("DispatchLaunch's env files %v; want %v (kubernetes.secret_env, the team's Secret's files in the pod)", a.EnvFiles, want)
	}
	if a.Kubernetes == nil || len(a.Prepare) != 2 || len(a.KubeFiles[PodConfigName]) == 0 || a.Sandbox != nil {
		t.Errorf("DispatchLaunch: target %v, prepare %q, files %d; want the cluster, the clone and the worktree, the pod's legion.toml, no sandbox", a.Kubernetes, a.Prepare, len(a.KubeFiles))
	}

	// The pod's legion.toml: the same team, the clone as its workspace,
	// the key from the team's Secret, nothing of this machine's.
	var doc map[string]any
	if _, err := toml.Decode(string(d.PodConfig), &doc); err != nil {
		t.Fatalf("the pods' legion.toml does not decode: %v\n%s", err, d.PodConfig)
	}
	text := string(d.PodConfig)
	_, body, _ := strings.Cut(text, "\n") // past the comment naming the file it came from
	for _, gone := range []string{"notify", "ntfy", "webhook_secret_file", "instructions_dir", "[helper]", filepath.Dir(tm.ConfigPath)} {
		if strings.Contains(body, gone) {
			t.Errorf("the pods' legion.toml has %q:\n%s", gone, text)
		}
	}
	// It loads as legion.toml once the clone is there (config checks the
	// workspace exists).
	clone := t.TempDir()
	pod := filepath.Join(t.TempDir(), "legion.toml")
	if err := os.WriteFile(pod, []byte(strings.ReplaceAll(text, PodRepo, clone)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(pod)
	if err != nil {
		t.Fatalf("the pods' legion.toml: %v\n%s", err, text)
	}
	pt, ok := cfg.Team("demo")
	if pt.WIPLimit != 2 || pt.Notify.Desktop {
		t.Errorf("the pods' team: wip_limit %d, notify.desktop %t; want [defaults]' 2 and no notifications", pt.WIPLimit, pt.Notify.Desktop)
	}
	if !ok || pt.ID != tm.ID || pt.Tracker != config.TrackerLinear || pt.Linear.CredentialsFile != "/run/secrets/legion/"+PodLinearKey ||
		pt.Linear.APIURL != tm.Linear.APIURL || pt.Engine != config.EngineKubernetes {
		t.Errorf("the pods' team = %+v; want team demo with its id, Linear at the same URL, its key from /run/secrets/legion/%s", pt, PodLinearKey)
	}
}

// TestPlanOnClusterKinds: Codex, Gemini CLI and opencode phases on a
// cluster are planned as Claude Code's are (TestPlanOnClusterClaude):
// prepared in the pod by `legion agent prepare` after the worktree
// exists, nothing of the kind's written on this machine (their Prepare
// wrote their homes at the pod's paths here before PlanOnly held for
// them, and the controller refused them).
func TestPlanOnClusterKinds(t *testing.T) {
	for _, kind := range []string{"codex", "gemini", "opencode"} {
		t.Run(kind, func(t *testing.T) {
			tm := clusterTeam(t, `agent.kind_by_mode = { implement = "`+kind+`", retro = "`+kind+`" }
agent.env = { GIT_AUTHOR_NAME = "Ada", GIT_AUTHOR_EMAIL = "ada@example.com", GIT_COMMITTER_NAME = "Ada", GIT_COMMITTER_EMAIL = "ada@example.com" }
`)
			home := t.TempDir()
			d, err := tm.PlanDispatch(t.Context(), "ENG-7", "implement", home)
			if err != nil {
				t.Fatalf("PlanDispatch: %v", err)
			}
			wantPrep := []string{"/opt/legion/legion", "agent", "prepare", "/run/legion-spec/" + agent.PodPrepareFile}
			if len(d.Prepare) != 3 || !slices.Equal(d.Prepare[2], wantPrep) || len(d.AgentPrepare) == 0 {
				t.Errorf("prepare %q; want the clone, the worktree, then %q with the pod's plan", d.Prepare, wantPrep)
			}
			if ents, err := os.ReadDir(home); err != nil || len(ents) != 0 {
				t.Errorf("the home given to PlanDispatch holds %v (%v); want nothing written on this machine", ents, err)
			}
			if _, err := os.Stat("/legion"); err == nil {
				t.Error("/legion exists on this machine: a pod's path was written here")
			}
		})
	}
}

func TestCheckCluster(t *testing.T) {
	codex := config.Team{Name: "demo", Engine: config.EngineKubernetes, Tracker: config.TrackerLinear, Kubernetes: config.Kubernetes{Repository: "https://git.example/demo.git"},
		Agent: config.Agent{Kind: config.AgentCodex}}
	if err := CheckCluster(codex); err != nil {
		t.Errorf("CheckCluster of a codex team: %v; want none", err)
	}
	local := config.Team{Name: "demo", Engine: config.EngineKubernetes, Tracker: config.TrackerLocal}
	err := CheckCluster(local)
	if err == nil || !strings.Contains(err.Error(), "kubernetes.repository is not set") || !strings.Contains(err.Error(), `tracker = "local"`) {
		t.Errorf("CheckCluster of a local-tracker team without a repository: %v; want both named", err)
	}
	if err := CheckCluster(config.Team{Name: "demo", Engine: config.EngineSystemd, Tracker: config.TrackerLocal}); err != nil {
		t.Errorf("CheckCluster of a team under systemd: %v", err)
	}
}

// TestPlanOnClusterClaude: a Claude Code phase on a cluster is planned
// with the pod's paths and prepared in the pod: its launch names the
// settings file on the issue's volume, the pod runs `legion agent
// prepare` on the plan in its spec Secret after the worktree exists, and
// nothing of the kind's is written on this machine.
func TestPlanOnClusterClaude(t *testing.T) {
	tm := clusterTeam(t, `agent.kind_by_mode = { implement = "claude", retro = "claude" }
agent.env = { GIT_AUTHOR_NAME = "Ada", GIT_AUTHOR_EMAIL = "ada@example.com", GIT_COMMITTER_NAME = "Ada", GIT_COMMITTER_EMAIL = "ada@example.com" }
`)
	home := t.TempDir()
	d, err := tm.PlanDispatch(t.Context(), "ENG-7", "implement", home)
	if err != nil {
		t.Fatal(err)
	}
	settings := "/legion/state/agents/" + d.WorkerID.String() + "/settings.json"
	if d.Agent != "claude" || !slices.Contains(d.ArgvNew, settings) || !slices.Contains(d.ArgvNew, "manual") {
		t.Errorf("agent %q, argv %q; want claude with --settings %s --permission-mode manual", d.Agent, d.ArgvNew, settings)
	}
	wantPrep := []string{"/opt/legion/legion", "agent", "prepare", "/run/legion-spec/" + agent.PodPrepareFile}
	if len(d.Prepare) != 3 || !slices.Equal(d.Prepare[2], wantPrep) {
		t.Errorf("prepare %q; want the clone, the worktree, then %q", d.Prepare, wantPrep)
	}
	if len(d.OwnCommands) == 0 {
		t.Error("no own commands: the worker would ask a person for the agent's own tracker commands")
	}
	a := tm.DispatchLaunch(d, config.Worker{StartupGrace: time.Minute})
	p, err := agent.DecodePodPrepare(a.KubeFiles[agent.PodPrepareFile], agent.PodPrepareFile)
	if err != nil {
		t.Fatal(err)
	}
	if p.Session.Home != "/legion/home" || p.Session.Legion != "/opt/legion/legion" || !slices.Equal(p.Want.ArgvNew, d.ArgvNew) {
		t.Errorf("the pod's plan: home %q, legion %q, argv %q; want /legion/home, /opt/legion/legion, the dispatch's %q", p.Session.Home, p.Session.Legion, p.Want.ArgvNew, d.ArgvNew)
	}
	if ents, err := os.ReadDir(home); err != nil || len(ents) != 0 {
		t.Errorf("the home given to PlanDispatch holds %v (%v); want nothing written on this machine", ents, err)
	}
	if _, err := os.Stat("/legion"); err == nil {
		t.Error("/legion exists on this machine: a pod's path was written here")
	}
}
