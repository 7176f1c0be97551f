package activation

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
)

// testLaunch is a full launch of argv as an ad-hoc session called name,
// with supervision values a person would not notice in a test: what
// `legion spawn --name name -- argv...` sends for an empty legion.toml,
// but a 10s cooldown and a 10m start-limit interval.
func testLaunch(name string, argv ...string) api.SpawnArgs {
	return api.SpawnArgs{
		Team: config.AdhocTeam, TeamID: config.AdhocTeamID.String(),
		Name: name, ID: uuid.NewSHA1(config.AdhocTeamID, []byte(name+":"+api.ModeSpawn)).String(),
		Mode: api.ModeSpawn, Role: roleCommand, Cwd: "/", Argv: argv,
		Cooldown:           new(api.Duration(10 * time.Second)),
		StartLimitBurst:    5,
		StartLimitInterval: api.Duration(10 * time.Minute),
		RingSize:           1 << 20,
	}
}

// TestCheckLaunch: a launch is taken as sent (no defaults: a 0s cooldown
// stays 0), and each bad field is refused with bad_request naming it.
func TestCheckLaunch(t *testing.T) {
	good := testLaunch("docs", "/bin/true")
	good.Cooldown = new(api.Duration(0))
	l, err := checkLaunch(good)
	if err != nil {
		t.Fatalf("checkLaunch(%+v) = %v; want nil", good, err)
	}
	want := launch{
		name: "docs", id: good.ID, unit: "legion-" + config.AdhocTeamID.String()[:8] + "-docs-spawn.service",
		team: config.AdhocTeam, teamID: config.AdhocTeamID, mode: api.ModeSpawn, role: roleCommand, cwd: "/",
		argvNew: []string{"/bin/true"}, cooldown: 0, startLimitBurst: 5, startLimitInterval: 10 * time.Minute, ringSize: 1 << 20,
	}
	if diff := cmp.Diff(want, l, cmp.AllowUnexported(launch{})); diff != "" {
		t.Errorf("checkLaunch mismatch (-want +got):\n%s", diff)
	}
	worker := good
	worker.Issue, worker.Mode, worker.Role = "ENG-7", "implement", roleWorker
	worker.Watch, worker.StaleAfter, worker.StartupGrace = "/tmp/session.jsonl", api.Duration(time.Minute), new(api.Duration(0))
	worker.ArgvResume = []string{"claude", "--resume", "x"}
	if l, err := checkLaunch(worker); err != nil || l.unit != "legion-"+config.AdhocTeamID.String()[:8]+"-ENG\\x2d7-implement.service" {
		t.Errorf("checkLaunch(worker) = %q, %v; want the unit named after the issue and mode", l.unit, err)
	}
	hooked := good
	hooked.Agent, hooked.StaleAfter = "claude", api.Duration(time.Minute)
	if l, err := checkLaunch(hooked); err != nil || l.agent != "claude" || l.staleAfter != time.Minute {
		t.Errorf("checkLaunch(claude, stale_after without watch) = agent %q stale_after %s, %v; want claude, 1m0s, nil", l.agent, l.staleAfter, err)
	}
	hooked.OwnCommands, hooked.Legion = []string{api.OwnIssue}, "/opt/legion/bin/legion"
	if l, err := checkLaunch(hooked); err != nil || !slices.Equal(l.ownCommands, hooked.OwnCommands) || l.legion != hooked.Legion {
		t.Errorf("checkLaunch(own commands) = %q, legion %q, %v; want them as sent (the worker's spec checks them)", l.ownCommands, l.legion, err)
	}

	kube := func(a *api.SpawnArgs) {
		a.Kubernetes = &api.KubeTarget{Namespace: "team", Image: "legion-worker:test", Storage: "1Gi"}
	}
	onCluster := good
	kube(&onCluster)
	onCluster.Cwd = "/legion/work/repo" // the pod's: made by the prepare commands
	onCluster.Prepare = [][]string{{"legion", "worktree", "clone", "https://example.com/r.git", "/legion/repo"}, {"/usr/bin/legion", "worktree", "ensure", "t", "ENG-1"}}
	onCluster.KubeFiles = map[string][]byte{"legion.toml": []byte("[team.t]\n"), "a-1.b": nil}
	if l, err := checkLaunch(onCluster); err != nil || !cmp.Equal(l.prepare, onCluster.Prepare) || !cmp.Equal(l.kubeFiles, onCluster.KubeFiles) {
		t.Errorf("checkLaunch(prepare, kube files) = %q, %q, %v; want them as sent", l.prepare, l.kubeFiles, err)
	}

	tests := []struct {
		name  string
		edit  func(a *api.SpawnArgs)
		field string
	}{
		{"no team", func(a *api.SpawnArgs) { a.Team = "" }, "team"},
		{"bad team id", func(a *api.SpawnArgs) { a.TeamID = "adhoc" }, "team_id"},
		{"no name", func(a *api.SpawnArgs) { a.Name = "" }, "name"},
		{"bad name", func(a *api.SpawnArgs) { a.Name = "a/b" }, "name"},
		{"no id", func(a *api.SpawnArgs) { a.ID = "" }, "id"},
		{"no mode", func(a *api.SpawnArgs) { a.Mode = "" }, "mode"},
		{"bad role", func(a *api.SpawnArgs) { a.Role = "boss" }, "role"},
		{"relative cwd", func(a *api.SpawnArgs) { a.Cwd = "src" }, "cwd"},
		{"missing cwd", func(a *api.SpawnArgs) { a.Cwd = "/no/such/dir" }, "cwd"},
		{"no argv", func(a *api.SpawnArgs) { a.Argv = nil }, "argv"},
		{"relative program", func(a *api.SpawnArgs) { a.Argv = []string{"./run"} }, "argv"},
		{"resume without watch", func(a *api.SpawnArgs) { a.ArgvResume = []string{"/bin/true"} }, "argv_resume"},
		{"bad env", func(a *api.SpawnArgs) { a.Env = []string{"NOVALUE"} }, "env"},
		{"relative watch", func(a *api.SpawnArgs) { a.Watch, a.StaleAfter = "s.jsonl", api.Duration(time.Minute) }, "watch"},
		{"watch without stale_after", func(a *api.SpawnArgs) { a.Watch = "/s.jsonl" }, "stale_after"},
		{"negative stale_after", func(a *api.SpawnArgs) { a.StaleAfter = api.Duration(-time.Minute) }, "stale_after"},
		{"unknown agent kind", func(a *api.SpawnArgs) { a.Agent = "codex" }, "agent"},
		{"watch without startup_grace", func(a *api.SpawnArgs) { a.Watch, a.StaleAfter = "/s.jsonl", api.Duration(time.Minute) }, "startup_grace"},
		{"startup_grace without watch", func(a *api.SpawnArgs) { a.StartupGrace = new(api.Duration(time.Minute)) }, "startup_grace"},
		{"no cooldown", func(a *api.SpawnArgs) { a.Cooldown = nil }, "cooldown"},
		{"no start limit burst", func(a *api.SpawnArgs) { a.StartLimitBurst = 0 }, "start_limit_burst"},
		{"no start limit interval", func(a *api.SpawnArgs) { a.StartLimitInterval = 0 }, "start_limit_interval"},
		{"no ring size", func(a *api.SpawnArgs) { a.RingSize = 0 }, "ring_size"},
		{"empty prepare", func(a *api.SpawnArgs) { a.Prepare = [][]string{{"/bin/true"}, {}} }, "prepare[1]"},
		{"relative prepare", func(a *api.SpawnArgs) { a.Prepare = [][]string{{"bin/legion", "worktree"}} }, "prepare[0]"},
		{"too many prepare", func(a *api.SpawnArgs) { a.Prepare = slices.Repeat([][]string{{"true"}}, 17) }, "prepare"},
		{"kube files on this machine", func(a *api.SpawnArgs) { a.KubeFiles = map[string][]byte{"legion.toml": nil} }, "kube_files"},
		{"env file relative", func(a *api.SpawnArgs) { a.EnvFiles = map[string]string{"API_KEY": "run/key"} }, "env_files"},
		{"env file not a variable", func(a *api.SpawnArgs) { a.EnvFiles = map[string]string{"API-KEY": "/run/key"} }, "env_files"},
		{"kube file named spec.json", func(a *api.SpawnArgs) { kube(a); a.KubeFiles = map[string][]byte{"spec.json": nil} }, `kube_files["spec.json"]`},
		{"kube file not a subdomain", func(a *api.SpawnArgs) { kube(a); a.KubeFiles = map[string][]byte{"a": nil, "../x": nil} }, `kube_files["../x"]`},
		{"kube files too big", func(a *api.SpawnArgs) {
			kube(a)
			a.KubeFiles = map[string][]byte{"a": make([]byte, api.MaxKubeFiles), "b": {1}}
		}, "kube_files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good
			tt.edit(&a)
			_, err := checkLaunch(a)
			if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "field "+tt.field+":") {
				t.Errorf("checkLaunch = %v; want bad_request naming field %s", err, tt.field)
			}
		})
	}
}
