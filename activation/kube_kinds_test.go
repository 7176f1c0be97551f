package activation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/followmodel"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// podKind is one real CLI for TestKubeKinds: its installed binary, how a
// user's home points it at its fake model API, and what the fake was
// sent.
type podKind struct {
	kind config.AgentKind
	bin  func(testing.TB) string
	// user writes the user's own config of the CLI under home and
	// returns the environment it needs (the API key, the fake's URL).
	user        func(t *testing.T, home string) []string
	transcripts func() ([]followmodel.Transcript, error)
}

// podAgent makes a the launch of the agent cfg of a's issue in a pod, as
// the controller plans one (team's planOnCluster), with prompt, legion
// the pod's legion, env more of the agent's environment and userHome the
// home of the user's own config of the CLI on this machine ("": none):
// the kind's launch planned with the pod's paths, writing nothing here,
// its agent.PodPrepare in the spec Secret (with the user's config files,
// agent.UserConfiger), and the prepare commands pre, then `legion agent
// prepare`. It returns the session's agent session id.
func podAgent(t *testing.T, a *api.SpawnArgs, cfg config.Agent, prompt, legion string, env []string, userHome string, pre ...[]string) string {
	t.Helper()
	kind, err := kinds.For(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sid := kind.SessionID(config.AdhocTeamID, a.Issue, a.Mode)
	s := agent.Session{
		ID: sid, Mode: a.Mode,
		Vars: config.Vars{SessionID: sid.String(), Issue: a.Issue, Mode: a.Mode, Workspace: wire.WorkDir, Prompt: prompt},
		Cwd:  wire.WorkDir, Repo: wire.WorkDir, Home: wire.HomeDir,
		Dir:    filepath.Join(wire.StateDir, "agents", a.ID),
		Legion: legion,
		Env:    append(slices.Clone(env), "LEGION_TEAM="+config.AdhocTeam, "LEGION_ISSUE="+a.Issue, "LEGION_MODE="+a.Mode),
		Pod:    true,
		// The user's environment: only the home of their config.
		LookupEnv: func(key string) (string, bool) {
			if key == "HOME" && userHome != "" {
				return userHome, true
			}
			return "", false
		},
	}
	planned, err := kind.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	l, plan, err := agent.PlanForPod(t.Context(), kind, cfg, s, planned)
	if err != nil {
		t.Fatal(err)
	}
	a.Agent, a.AgentSession, a.Legion = l.Agent, sid.String(), legion
	a.Argv, a.ArgvResume, a.Env = l.ArgvNew, l.ArgvResume, append(slices.Clone(s.Env), l.Env...)
	a.Watch, a.StartupGrace, a.StaleAfter = l.SessionFile, new(api.Duration(3*time.Minute)), api.Duration(10*time.Minute)
	a.DialogMarkers, a.ResumeMarker = l.DialogMarkers, l.ResumeMarker
	if l.Agent == string(config.AgentClaude) { // the worker reads its hooks
		a.OwnCommands = agent.OwnCommands(config.PermissionsAllowlist)
	}
	a.KubeFiles = map[string][]byte{agent.PodPrepareFile: plan}
	a.Prepare = append(slices.Clone(pre), []string{legion, "agent", "prepare", filepath.Join(wire.SpecDir, agent.PodPrepareFile)})
	return sid.String()
}

// TestKubeKinds: Codex, Gemini CLI and opencode, the real CLIs, each in
// a pod (the real worker, runc on a kwok node: not a real node) against
// its local fake model API in follow mode, which acts only on what the
// CLI sent it. The files each kind prepares (Codex's home and
// config.toml with its hooks, Gemini's and opencode's settings) are made
// in the pod by `legion agent prepare` from the controller's plan
// (agent.PlanForPod, shipped in the spec Secret), on the issue's volume,
// over the user's own config on this machine, which the plan carries
// (agent.UserConfiger: Codex's config.toml, Gemini CLI's settings,
// opencode's opencode.json; not opencode's plugin package, which its
// first start tries to install and, offline, goes on without). Each CLI
// starts without a dialog, runs its prompt's command in the pod (a wait
// for a person's permission, where the kind's allowlist policy asks,
// shows through the helper and a person's allow reaches it), its hooks
// reach the worker in the pod and the helper follows them (idle at its
// turn's end), and the session ends cleanly. This is what
// team.CheckCluster requires of a kind before a team on a cluster may
// run it.
func TestKubeKinds(t *testing.T) {
	legion := sdtest.LegionBinary(t)
	binDir := filepath.Dir(legion)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	openai := openaitest.NewServer(t)
	openai.Follow(followmodel.Traits{})
	gemini := geminitest.NewServer(t)
	gemini.Follow(followmodel.Traits{})
	cases := []podKind{
		{kind: config.AgentCodex, bin: codextest.Binary, transcripts: openai.Transcripts,
			user: func(t *testing.T, home string) []string {
				if err := openai.WriteUserConfig(home); err != nil {
					t.Fatal(err)
				}
				return []string{openaitest.KeyEnv + "=" + openaitest.Key}
			}},
		{kind: config.AgentGemini, bin: geminitest.Binary,
			user: func(t *testing.T, home string) []string {
				if err := geminitest.WriteUserSettings(home); err != nil {
					t.Fatal(err)
				}
				return gemini.Env()
			},
			transcripts: gemini.Transcripts},
		{kind: config.AgentOpencode, bin: opencodetest.Binary, transcripts: openai.Transcripts,
			user: func(t *testing.T, home string) []string {
				opencodetest.WriteUserConfig(t, openai, home)
				return []string{openaitest.KeyEnv + "=" + openaitest.Key}
			}},
	}

	// Each CLI's tree where the pods' user can read it, bound into every
	// pod (a real node has it from the image).
	clis := map[config.AgentKind]string{}
	homes := map[config.AgentKind]string{}
	envs := map[config.AgentKind][]string{}
	binds := []string{binDir}
	for _, k := range cases {
		clis[k.kind] = kubetest.PodCLI(t, k.bin(t))
		home := t.TempDir()
		envs[k.kind] = k.user(t, home)
		homes[k.kind] = home
		binds = append(binds, kubetest.PodCLIDir(clis[k.kind]))
	}
	path := binDir + ":/usr/bin:/bin"
	c := kubetest.Start(t, kubetest.Options{RunPods: true, PodBinds: binds, PodEnv: []string{"PATH=" + path},
		ExecEnv: map[string]string{"PATH": path}})
	const ns = "legion-kinds"
	kubeNamespace(t, c, ns, len(cases))
	ip := startInProcess(t, true, Options{KubeBinary: sdtest.KubeBinary(t)})
	cl := ip.client(t)

	for i, k := range cases {
		t.Run(string(k.kind), func(t *testing.T) {
			ctx := t.Context()
			issue := fmt.Sprintf("DEMO-%d", 40+i)
			a := kubeLaunch(c, ns, issue, "implement")
			work := wire.WorkDir
			made := "made-by-" + string(k.kind)
			command := "touch " + made
			prompt := "# Legion: implement " + issue + " (team adhoc)\n\nRun these commands in order, then end your turn:\n\n```sh\n" + command + "\n```\n"
			argv, argvResume, _ := config.KindArgv(k.kind)
			cfg := config.Agent{Kind: k.kind, Permissions: config.PermissionsAllowlist,
				New: append([]string{clis[k.kind]}, argv[1:]...), Resume: append([]string{clis[k.kind]}, argvResume[1:]...)}
			podAgent(t, &a, cfg, prompt, legion, envs[k.kind], homes[k.kind],
				[]string{"/bin/mkdir", "-p", work})
			if _, err := cl.Spawn(ctx, a); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if !t.Failed() {
					return
				}
				for _, p := range podsOf(t, c, ns, a.ID) {
					vol := c.VolumeDir(ns, p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
					tr, _ := os.ReadFile(filepath.Join(vol, "state", "transcripts", a.ID+".log"))
					t.Logf("pod %s: the transcript's end:\n%s", p.Name, tr[max(0, len(tr)-3000):])
				}
			})

			// The command's result reaches the fake; a wait for a
			// person's permission on the way is answered as a person
			// would, through the helper.
			allowed := 0
			waitfor.Check(t, 4*time.Minute, "a request carrying the result of "+command, func() error {
				ts, err := k.transcripts()
				if err != nil {
					return waitfor.Stop(err)
				}
				for _, tr := range ts {
					if r := tr.ResultOf(command); r != nil {
						if r.IsError {
							return waitfor.Stop(fmt.Errorf("the command failed in the pod: %s", r.Text))
						}
						return nil
					}
				}
				res, err := cl.List(ctx)
				if err != nil {
					return err
				}
				for _, v := range res.Sessions {
					if v.Name != a.Name {
						continue
					}
					if v.State.Ended() {
						return waitfor.Stop(fmt.Errorf("the session ended: %+v", v))
					}
					if v.Agent != nil && v.Agent.State == api.AgentWaitingPermission {
						if _, err := cl.Respond(ctx, api.RespondArgs{Name: a.Name, Decision: api.DecisionAllow, By: "test"}); err != nil {
							return err
						}
						allowed++
					}
					return fmt.Errorf("listed as %+v", v)
				}
				return fmt.Errorf("%s not listed", a.Name)
			})
			kubeSession(t, cl, a.Name, "idle after its turn", func(s api.Session) bool {
				return s.Agent != nil && s.Agent.State == api.AgentIdle
			})
			pods := podsOf(t, c, ns, a.ID)
			if len(pods) != 1 {
				t.Errorf("%d pods; want 1 (no restart)", len(pods))
			}
			vol := c.VolumeDir(ns, pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
			if _, err := os.Stat(filepath.Join(vol, "work", made)); err != nil {
				t.Errorf("the command did not run in the pod: %v", err)
			}
			t.Logf("%s in a pod: %d permission waits allowed", k.kind, allowed)
			if _, err := cl.End(ctx, a.Name, "done"); err != nil {
				t.Fatal(err)
			}
			kubeSession(t, cl, a.Name, "exited 0", func(s api.Session) bool {
				return s.State == api.StateExited && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 0
			})
			spec, err := json.Marshal(pods[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{openaitest.Key, geminitest.Key} {
				if strings.Contains(string(spec), key) {
					t.Errorf("the pod's spec holds an API key")
				}
			}
		})
	}
}
