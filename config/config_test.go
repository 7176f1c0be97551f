package config

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/ptyworker/termkeys"
)

const demoID = "6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f"

// writeConfig writes text to a legion.toml in a temp dir, with @WS@
// replaced by an existing temp workspace; it returns the file and the
// workspace.
func writeConfig(t *testing.T, text string) (path, ws string) {
	t.Helper()
	dir := t.TempDir()
	ws = filepath.Join(dir, "work space")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "legion.toml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "@WS@", ws)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, ws
}

func TestLoadValid(t *testing.T) {
	path, ws := writeConfig(t, `
[helper]
idle_exit = "0"
log_level = "debug"
session_limit = 6

[worker]
ring_size = "64K"
detach_key = "ctrl-q"

[defaults]
stale_after = "15 min"
agent.new = ["my-agent", "--id={session_id}", "{prompt}"]
linear.api_key_env = "MY_LINEAR_KEY"

[teams.demo]
id = "`+demoID+`"
workspace = "@WS@"
wip_limit = 3
session_limit = 4
memory_max = "4G"
cpu_quota = "150%"
tasks_max = 256
tracker = "linear"
agent.memory_max = "1G"
agent.cpu_weight = 50
hardening = { relax = ["PrivateDevices"], add = ["PrivateTmp"] }

[teams.demo.linear]
team_key = "ENG"
status_done = "Shipped"

[teams."my team/ü"]
id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
workspace = "@WS@"
controller = "agent"
review = "github"
github = { repo = "example/demo", merge_method = "squash" }
`)
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}

	defaults := defaultTeam()
	defaults.StaleAfter = 15 * time.Minute
	defaults.Agent.New = []string{"my-agent", "--id={session_id}", "{prompt}"}
	defaults.Linear.APIKeyEnv = "MY_LINEAR_KEY"
	defaults.MachineSessionLimit = 6 // [helper] session_limit, in every team

	demo := defaults
	demo.Name, demo.ID, demo.Workspace, demo.IssuePrefix = "demo", uuid.MustParse(demoID), ws, "DEMO"
	demo.WIPLimit, demo.MemoryMax, demo.CPUQuotaPercent, demo.TasksMax = 3, 4<<30, 150, 256
	demo.Tracker = TrackerLinear
	demo.SessionLimit = 4
	demo.Agent.MemoryMax, demo.Agent.CPUWeight = 1<<30, 50
	demo.Hardening = Hardening{Relax: []string{"PrivateDevices"}, Add: []string{"PrivateTmp"}}
	demo.Linear.TeamKey, demo.Linear.StatusDone = "ENG", "Shipped"

	mine := defaults
	mine.Name, mine.ID, mine.Workspace, mine.IssuePrefix = "my team/ü", uuid.MustParse("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"), ws, "MYTEAM"
	mine.Controller, mine.Review, mine.GitHub.Repo = ControllerAgent, ReviewGitHub, "example/demo"
	mine.GitHub.MergeMethod = "squash"

	want := &Config{
		Path:     path,
		Helper:   Helper{IdleExit: 0, LogLevel: slog.LevelDebug, SessionLimit: 6},
		Worker:   Worker{RingSize: 64 << 10, DetachKey: termkeys.MustParseKey("ctrl-q"), StartupGrace: 2 * time.Minute},
		Web:      defaultWeb(),
		Defaults: defaults,
		Teams:    []Team{demo, mine},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(%s) mismatch (-want +got):\n%s", path, diff)
	}
	if s := got.Teams[0].ShortID(); s != "6f1c2e0a" {
		t.Errorf("ShortID() = %q; want %q", s, "6f1c2e0a")
	}
	if tm, ok := got.Team("my team/ü"); !ok || tm.Controller != ControllerAgent {
		t.Errorf("Team(%q) = %v, %v; want the agent-controlled team", "my team/ü", tm, ok)
	}
}

func TestLoadEmptyIsDefaults(t *testing.T) {
	path, _ := writeConfig(t, "# nothing here\n")
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{Path: path, Helper: defaultHelper(), Worker: defaultWorker(), Web: defaultWeb(), Defaults: defaultTeam()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(empty) mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope", "legion.toml")
	_, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v; want an error wrapping fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "legion team add") {
		t.Errorf("Load(missing) = %q; want the path and how to create the file", err)
	}
	cfg, err := LoadOrEmpty(path)
	if err != nil {
		t.Fatalf("LoadOrEmpty(missing) = %v; want no error", err)
	}
	if cfg.Path != path || len(cfg.Teams) != 0 || cfg.Defaults.WIPLimit != 1 {
		t.Errorf("LoadOrEmpty(missing) = %+v; want defaults and no teams", cfg)
	}
}

// team is a valid team table with @WS@ as its workspace.
const team = `[teams.demo]
id = "` + demoID + `"
workspace = "@WS@"
`

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string // @FILE@ is the config file; @WS@ the workspace
	}{
		{
			name: "unknown key",
			text: team + `stale_aftr = "5m"` + "\n",
			want: `@FILE@:4: teams.demo.stale_aftr: unknown key "stale_aftr" in [defaults] or [teams.<name>]: did you mean "stale_after"?`,
		},
		{
			name: "unknown key in subtable",
			text: team + "[teams.demo.linear]\nteam_key = \"ENG\"\napi_token = \"x\"\n",
			want: `@FILE@:6: teams.demo.linear.api_token: unknown key "linear.api_token" in [defaults] or [teams.<name>] (see legion.toml(5) for the known keys)`,
		},
		{
			name: "unknown top-level table",
			text: "\n[team.demo]\nid = 1\n",
			want: `@FILE@:2: team: unknown key: expected the tables [helper], [worker], [web], [defaults] and [teams.<name>]`,
		},
		{
			name: "web address not an IP",
			text: "[web]\naddress = \"localhost\"\n",
			want: `@FILE@:2: web.address: invalid address "localhost": expected an IP address such as "127.0.0.1" or "::1"`,
		},
		{
			name: "web port out of range",
			text: "[web]\nport = 70000\n",
			want: `@FILE@:2: web.port: 70000 is out of range: expected an integer from 1 to 65535`,
		},
		{
			name: "unknown helper key",
			text: "[helper]\n\n  idle = \"5m\" # comment\n",
			want: `@FILE@:3: helper.idle: unknown key "idle" in [helper]: did you mean "idle_exit"?`,
		},
		{
			name: "unknown merge method",
			text: team + `github.merge_method = "fast-forward"` + "\n",
			want: `@FILE@:4: teams.demo.github.merge_method: unknown merge method "fast-forward": expected "merge", "squash" or "rebase"`,
		},
		{
			name: "bad duration",
			text: team + `stale_after = "10 minutes please"` + "\n",
			want: `@FILE@:4: teams.demo.stale_after: invalid duration "10 minutes please": expected e.g. "30s", "10m", "1h30m" or "2min 30s"`,
		},
		{
			name: "duration as integer",
			text: "[defaults]\nrestart_cooldown = 30\n",
			want: `@FILE@:2: defaults.restart_cooldown: expected a duration string such as "30s" or "10m", got integer 30`,
		},
		{
			name: "team without id",
			text: "# my team\n[teams.demo]\nworkspace = \"@WS@\"\n",
			want: "@FILE@:2: teams.demo.id: missing: every team needs an id, a UUID (`legion team add` writes one)",
		},
		{
			name: "bad uuid",
			text: "[teams.demo]\nid = \"not-a-uuid\"\nworkspace = \"@WS@\"\n",
			want: `@FILE@:2: teams.demo.id: invalid UUID "not-a-uuid": expected the form "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"`,
		},
		{
			name: "workspace does not exist",
			text: "[teams.demo]\nid = \"" + demoID + "\"\nworkspace = \"@WS@/gone\"\n",
			want: `@FILE@:3: teams.demo.workspace: directory @WS@/gone does not exist`,
		},
		{
			name: "relative workspace",
			text: "[teams.demo]\nid = \"" + demoID + "\"\nworkspace = \"src/demo\"\n",
			want: `@FILE@:3: teams.demo.workspace: path "src/demo" is relative: expected an absolute path or one starting with ~/`,
		},
		{
			name: "wrong type",
			text: team + "wip_limit = \"two\"\n",
			want: `@FILE@:4: teams.demo.wip_limit: expected an integer, got string "two"`,
		},
		{
			name: "wip limit below one",
			text: team + "wip_limit = 0\n",
			want: `@FILE@:4: teams.demo.wip_limit: 0 is out of range: expected an integer from 1 to 1000`,
		},
		{
			name: "unknown placeholder",
			text: team + "agent.new = [\"claude\",\n  \"--session-id\", \"{sesion_id}\"]\n",
			want: `@FILE@:4: teams.demo.agent.new: argument 2 "{sesion_id}": unknown placeholder {sesion_id}: expected one of {session_id}, {prompt}, {issue}, {mode}, {workspace}`,
		},
		{
			name: "empty argv",
			text: "[defaults]\nagent = { resume = [] }\n",
			want: `@FILE@:2: defaults.agent.resume: empty argv: expected the program and its arguments`,
		},
		{
			name: "unknown tracker kind",
			text: team + "tracker = \"jira\"\n",
			want: `@FILE@:4: teams.demo.tracker: unknown tracker kind "jira": expected "local", "linear" or "github"`,
		},
		{
			name: "github tracker without repository",
			text: team + "tracker = \"github\"\n",
			want: `@FILE@:4: teams.demo.github.repo: missing: required when tracker = "github" (the repository as "owner/name")`,
		},
		{
			name: "kubernetes engine without namespace",
			text: team + "engine = \"kubernetes\"\nkubernetes.image = \"reg.example/w:1\"\n",
			want: `@FILE@:4: teams.demo.kubernetes.namespace: missing: required when engine = "kubernetes" (the team's namespace)`,
		},
		{
			name: "kubernetes engine without image",
			text: team + "engine = \"kubernetes\"\nkubernetes.namespace = \"demo\"\n",
			want: `@FILE@:4: teams.demo.kubernetes.image: missing: required when engine = "kubernetes" (the worker image: README, Kubernetes)`,
		},
		{
			name: "kubernetes secret_env without the secret",
			text: team + "kubernetes.secret_env = { ANTHROPIC_API_KEY = \"anthropic-api-key\" }\n",
			want: `@FILE@:4: teams.demo.kubernetes.secret: missing: required with kubernetes.secret_env (the Secret whose keys it names)`,
		},
		{
			name: "kubernetes secret_env not a key",
			text: team + "kubernetes.secret = \"s\"\nkubernetes.secret_env = { ANTHROPIC_API_KEY = \"a/b\" }\n",
			want: `@FILE@:5: teams.demo.kubernetes.secret_env: ANTHROPIC_API_KEY: "a/b" is not a key of a Secret (letters, digits, '-', '_' and '.', at most 253)`,
		},
		{
			name: "kubernetes secret_env of Legion's",
			text: team + "kubernetes.secret = \"s\"\nkubernetes.secret_env = { LEGION_KEY = \"k\" }\n",
			want: `@FILE@:5: teams.demo.kubernetes.secret_env: LEGION_KEY: LEGION_* variables are Legion's own`,
		},
		{
			name: "kubernetes bad quantity",
			text: team + "kubernetes.memory_limit = \"2 GB\"\n",
			want: `@FILE@:4: teams.demo.kubernetes.memory_limit: invalid quantity "2 GB": expected a Kubernetes quantity such as "500m", "2" or "10Gi"`,
		},
		{
			name: "kubernetes bad namespace",
			text: team + "kubernetes.namespace = \"Demo_NS\"\n",
			want: `@FILE@:4: teams.demo.kubernetes.namespace: invalid namespace "Demo_NS": expected a DNS label (lower-case letters, digits and '-', at most 63)`,
		},
		{
			name: "linear without team key",
			text: team + "tracker = \"linear\"\n",
			want: `@FILE@:4: teams.demo.linear.team_key: missing: required when tracker = "linear" (the Linear team key, e.g. "ENG")`,
		},
		{
			name: "webhook without repository",
			text: team + "github.webhook_secret_file = \"/etc/hook-secret\"\n",
			want: `@FILE@:4: teams.demo.github.repo: missing: required with github.webhook_secret_file (the repository whose events the webhook accepts, as "owner/name")`,
		},
		{
			name: "notify webhook without secret",
			text: team + "notify.webhook_url = \"https://hooks.example.net/x\"\n",
			want: `@FILE@:4: teams.demo.notify.webhook_secret_file: missing: required with notify.webhook_url (or notify.webhook_secret_env): the secret that signs each message`,
		},
		{
			name: "notify URL not http",
			text: team + "notify.ntfy_url = \"ntfy.sh/topic\"\n",
			want: `@FILE@:4: teams.demo.notify.ntfy_url: invalid URL "ntfy.sh/topic": expected an http:// or https:// address with a host`,
		},
		{
			name: "budget negative",
			text: team + "budget.issue_usd = -5\n",
			want: `@FILE@:4: teams.demo.budget.issue_usd: -5 is out of range: expected a number of US dollars from 0 to 1e+09`,
		},
		{
			name: "budget price field",
			text: team + "budget.prices = { \"gpt-5\" = { input = 1.25, ouput = 10 } }\n",
			want: `@FILE@:4: teams.demo.budget.prices: gpt-5.ouput: unknown field: expected input, output, cache_read or cache_write`,
		},
		{
			name: "budget tokens as string",
			text: team + "budget.day_tokens = \"1M\"\n",
			want: `@FILE@:4: teams.demo.budget.day_tokens: expected an integer, got string "1M"`,
		},
		{
			name: "start limit that cannot trip",
			text: "[defaults]\nrestart_cooldown = \"1m\"\nstart_limit_interval = \"5m\"\n",
			want: `@FILE@:3: defaults.start_limit_interval: start_limit_interval 5m0s must be longer than start_limit_burst × restart_cooldown (5 × 1m0s = 5m0s): restarts come at most once per cooldown, so systemd's start limit could never trip`,
		},
		{
			name: "per-team key in defaults",
			text: "[defaults]\nid = \"" + demoID + "\"\n",
			want: `@FILE@:2: defaults.id: id is set per team: move it to [teams.<name>]`,
		},
		{
			name: "team is not a table",
			text: "teams.demo = 5\n",
			want: `@FILE@:1: teams.demo: expected a table [teams.demo], got integer 5`,
		},
		{
			name: "subtable is not a table",
			text: team + "linear = \"ENG\"\n",
			want: `@FILE@:4: teams.demo.linear: expected a table, got string "ENG"`,
		},
		{
			name: "memory max",
			text: team + "memory_max = \"4 gigs\"\n",
			want: `@FILE@:4: teams.demo.memory_max: invalid size "4 gigs": expected bytes or a number with K, M, G or T, e.g. "512M" or "4G"`,
		},
		{
			name: "agent memory max",
			text: team + "agent.memory_max = 0\n",
			want: `@FILE@:4: teams.demo.agent.memory_max: agent.memory_max 0 would kill every agent at start: expected a size such as "2G", or leave it unset`,
		},
		{
			name: "agent cpu weight",
			text: team + "agent.cpu_weight = 0\n",
			want: `@FILE@:4: teams.demo.agent.cpu_weight: 0 is out of range: expected an integer from 1 to 10000`,
		},
		{
			name: "hardening unknown",
			text: team + "hardening.add = [\"ProtectHome\"]\n",
			want: `@FILE@:4: teams.demo.hardening.add: add: unknown directive "ProtectHome": expected one of SystemCallFilter, RestrictNamespaces, RestrictAddressFamilies, MemoryDenyWriteExecute, PrivateTmp, ProtectKernelLogs, ProtectProc, UMask, LockPersonality, SystemCallArchitectures`,
		},
		{
			name: "hardening not a default",
			text: team + "hardening.relax = [\"PrivateTmp\"]\n",
			want: `@FILE@:4: teams.demo.hardening.relax: relax: unknown directive "PrivateTmp": expected one of PrivateUsers, NoNewPrivileges, ProtectSystem, PrivateDevices, ProtectKernelTunables, ProtectKernelModules, ProtectControlGroups, ProtectClock, ProtectHostname, RestrictRealtime, RestrictSUIDSGID, LockPersonality, SystemCallArchitectures, RestrictAddressFamilies, InaccessiblePaths, KeyringMode, CapabilityBoundingSet`,
		},
		{
			name: "hardening twice",
			text: team + "hardening.add = [\"PrivateTmp\", \"PrivateTmp\"]\n",
			want: `@FILE@:4: teams.demo.hardening.add: add: PrivateTmp is listed twice`,
		},
		{
			name: "hardening private users",
			text: team + "hardening.relax = [\"PrivateUsers\", \"ProtectSystem\"]\n",
			want: `@FILE@:4: teams.demo.hardening.relax: relax: PrivateUsers is needed by PrivateDevices, ProtectKernelTunables, ProtectKernelModules, ProtectControlGroups, ProtectClock, ProtectHostname, InaccessiblePaths, CapabilityBoundingSet (a user manager ignores or refuses them without it): relax them too, or keep PrivateUsers`,
		},
		{
			name: "hardening not a list",
			text: team + "hardening.add = \"PrivateTmp\"\n",
			want: `@FILE@:4: teams.demo.hardening.add: expected an array of directive names such as ["PrivateTmp"], got string "PrivateTmp"`,
		},
		{
			name: "cpu quota",
			text: team + "cpu_quota = \"2\"\n",
			want: `@FILE@:4: teams.demo.cpu_quota: invalid percentage "2": expected a whole number with %, e.g. "200%" (100% is one CPU)`,
		},
		{
			name: "detach key",
			text: "[worker]\ndetach_key = \"ctrl-m\"\n",
			want: `@FILE@:2: worker.detach_key: detach key "ctrl-m" cannot be used: it is Enter (Carriage Return)`,
		},
		{
			// config's own parser took this, and legion attach refused it
			name: "detach key backspace",
			text: "[worker]\ndetach_key = \"ctrl-h\"\n",
			want: `@FILE@:2: worker.detach_key: detach key "ctrl-h" cannot be used: it is Backspace on many terminals`,
		},
		{
			name: "team name with control character",
			text: "[teams.\"a\\tb\"]\nid = \"" + demoID + "\"\nworkspace = \"@WS@\"\n",
			want: `@FILE@:1: teams."a\tb": invalid team name "a\tb": expected no control characters`,
		},
		{
			name: "duplicate short id",
			text: team + "[teams.other]\nid = \"6f1c2e0a-0000-4000-8000-000000000000\"\nworkspace = \"@WS@\"\n",
			want: `@FILE@:5: teams.other.id: team "demo" has an id starting with 6f1c2e0a too: ids must differ in their first 8 hex characters, which name the team's units`,
		},
		{
			name: "syntax error",
			text: "[teams.demo]\nid = \"" + demoID + "\"\nworkspace = @WS@\n",
			want: `@FILE@:3:13: invalid TOML: expected value but found '/' instead`,
		},
		{
			name: "unknown agent kind",
			text: team + "agent.kind = \"aider\"\n",
			want: `@FILE@:4: teams.demo.agent.kind: unknown agent kind "aider": expected "claude", "codex", "gemini", "opencode" or "custom"`,
		},
		{
			name: "unknown permission policy",
			text: "[defaults]\nagent.permissions = \"yolo\"\n",
			want: `@FILE@:2: defaults.agent.permissions: unknown permission policy "yolo": expected "sandbox", "allowlist", "ask" or "bypass"`,
		},
		{
			name: "permissions by unknown mode",
			text: team + "\n[teams.demo.agent]\npermissions_by_mode = { review = \"ask\", deploy = \"bypass\" }\n",
			want: `@FILE@:6: teams.demo.agent.permissions_by_mode: unknown mode "deploy": expected plan, implement, review, retro, finish`,
		},
		{
			name: "permissions by mode with a bad policy",
			text: team + "agent.permissions_by_mode.finish = \"never\"\n",
			want: `@FILE@:4: teams.demo.agent.permissions_by_mode: finish: unknown permission policy "never": expected "sandbox", "allowlist", "ask" or "bypass"`,
		},
		{
			name: "permissions by mode not a table",
			text: team + "agent.permissions_by_mode = \"ask\"\n",
			want: `@FILE@:4: teams.demo.agent.permissions_by_mode: expected a table such as { review = "ask" }, got string "ask"`,
		},
		{
			name: "bad permission rule",
			text: team + "agent.allow = [\"Bash(make test)\", \"Bash(make test\"]\n",
			want: `@FILE@:4: teams.demo.agent.allow: rule 1: invalid permission rule "Bash(make test": expected a tool name with an optional specifier in parentheses, e.g. "Bash(make test)" or "Bash(go test:*)"`,
		},
		{
			name: "permission rule not a string",
			text: team + "agent.allow = [\"Bash(make test)\", 3]\n",
			want: `@FILE@:4: teams.demo.agent.allow: rule 1: expected a string, got integer 3`,
		},
		{
			name: "permission rules not an array",
			text: team + "agent.allow = \"Bash(make test)\"\n",
			want: `@FILE@:4: teams.demo.agent.allow: expected an array of permission rules such as ["Bash(make test)"], got string "Bash(make test)"`,
		},
		{
			name: "idle grace",
			text: team + "idle_grace = \"a bit\"\n",
			want: `@FILE@:4: teams.demo.idle_grace: invalid duration "a bit": expected e.g. "30s", "10m", "1h30m" or "2min 30s"`,
		},
		{
			name: "array of tables",
			text: "[[teams]]\nname = \"demo\"\n",
			want: `@FILE@:1: teams: expected tables [teams.<name>], got array of tables`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, ws := writeConfig(t, tt.text)
			want := strings.NewReplacer("@FILE@", path, "@WS@", ws).Replace(tt.want)
			_, err := Load(path)
			if err == nil {
				t.Fatalf("Load(%q) = nil error; want %q", tt.text, want)
			}
			if err.Error() != want {
				t.Errorf("Load(%q) error:\n got %s\nwant %s", tt.text, err, want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("Load(%q) error %T is not a *config.Error", tt.text, err)
			}
		})
	}
}

func TestLoadReportsEveryError(t *testing.T) {
	path, ws := writeConfig(t, `[worker]
ring_size = "1K"
colour = "blue"

[teams.a]
workspace = "@WS@/missing"
stale_after = "soon"

[teams.b]
id = "`+demoID+`"
workspace = "@WS@"
wip_limit = 0
`)
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load = nil error; want five errors")
	}
	want := []string{
		path + `:2: worker.ring_size: ring size 1024 bytes is out of range: expected between 4K and 256M`,
		path + `:3: worker.colour: unknown key "colour" in [worker] (see legion.toml(5) for the known keys)`,
		path + `:5: teams.a.id: missing: every team needs an id, a UUID (` + "`legion team add`" + ` writes one)`,
		path + `:6: teams.a.workspace: directory ` + ws + `/missing does not exist`,
		path + `:7: teams.a.stale_after: invalid duration "soon": expected e.g. "30s", "10m", "1h30m" or "2min 30s"`,
		path + `:12: teams.b.wip_limit: 0 is out of range: expected an integer from 1 to 1000`,
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("Load errors mismatch (-want +got):\n%s", diff)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/config")
	t.Setenv(EnvConfig, "")
	if p, err := DefaultPath(); err != nil || p != "/x/config/legion/legion.toml" {
		t.Errorf("DefaultPath() = %q, %v; want /x/config/legion/legion.toml", p, err)
	}
	t.Setenv(EnvConfig, "/elsewhere/legion.toml")
	if p, err := DefaultPath(); err != nil || p != "/elsewhere/legion.toml" {
		t.Errorf("DefaultPath() with %s set = %q, %v; want /elsewhere/legion.toml", EnvConfig, p, err)
	}
}

// TestLoadAgent: agent.kind, the permission policy and its per-mode
// overrides, and agent.allow, from [defaults] and per team; a team's keys
// leave the defaults and the other teams alone.
func TestLoadAgent(t *testing.T) {
	path, _ := writeConfig(t, `
[defaults]
idle_grace = "2m"
agent.permissions = "ask"
agent.allow = ["Bash(make test)"]
agent.permissions_by_mode = { review = "allowlist" }

[teams.demo]
id = "`+demoID+`"
workspace = "@WS@"

[teams.demo.agent]
kind = "custom"
permissions = "bypass"
allow = ["Bash(go test:*)", "WebFetch(domain:example.com)", "mcp__tracker__comment"]
permissions_by_mode.finish = "ask"

[teams.other]
id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
workspace = "@WS@"
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	demo, _ := cfg.Team("demo")
	other, _ := cfg.Team("other")
	wantDemo := Agent{
		Kind: AgentCustom, New: defaultAgentNew, Resume: defaultAgentResume,
		Permissions:       PermissionsBypass,
		PermissionsByMode: map[string]PermissionPolicy{"finish": PermissionsAsk},
		Allow:             []string{"Bash(go test:*)", "WebFetch(domain:example.com)", "mcp__tracker__comment"},
	}
	wantOther := Agent{
		Kind: AgentClaude, New: defaultAgentNew, Resume: defaultAgentResume,
		Permissions:       PermissionsAsk,
		PermissionsByMode: map[string]PermissionPolicy{"review": PermissionsAllowlist},
		Allow:             []string{"Bash(make test)"},
	}
	if diff := cmp.Diff(wantDemo, demo.Agent); diff != "" {
		t.Errorf("teams.demo.agent (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantOther, other.Agent); diff != "" {
		t.Errorf("teams.other.agent (-want +got):\n%s", diff)
	}
	if other.IdleGrace != 2*time.Minute || demo.IdleGrace != 2*time.Minute {
		t.Errorf("idle_grace = %v, %v; want 2m from [defaults]", demo.IdleGrace, other.IdleGrace)
	}
	for _, tt := range []struct {
		agent Agent
		mode  string
		want  PermissionPolicy
	}{
		{demo.Agent, "finish", PermissionsAsk},
		{demo.Agent, "review", PermissionsBypass},
		{other.Agent, "review", PermissionsAllowlist},
		{other.Agent, "implement", PermissionsAsk},
	} {
		if got := tt.agent.Policy(tt.mode); got != tt.want {
			t.Errorf("Agent%+v.Policy(%q) = %q; want %q", tt.agent, tt.mode, got, tt.want)
		}
	}
	if d := defaultTeam(); d.Agent.Kind != AgentClaude || d.Agent.Policy("plan") != PermissionsSandbox || d.IdleGrace != 30*time.Second {
		t.Errorf("default agent = %+v, idle_grace %v; want claude, sandbox, 30s", d.Agent, d.IdleGrace)
	}
}

// TestLoadCodexArgv: a codex team without argvs of its own gets Codex's
// (not Claude Code's, whose --session-id Codex has not); its own argvs,
// or a codex [defaults]' argvs, win; a claude [defaults]' argvs are not
// inherited by a codex team.
func TestLoadCodexArgv(t *testing.T) {
	path, _ := writeConfig(t, `
[defaults]
agent.new = ["claude", "--verbose", "{prompt}"]

[teams.plain]
id = "`+demoID+`"
workspace = "@WS@"
agent.kind = "codex"

[teams.own]
id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
workspace = "@WS@"
agent.kind = "codex"
agent.new = ["/opt/codex", "-m", "o9", "{prompt}"]
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	plain, _ := cfg.Team("plain")
	own, _ := cfg.Team("own")
	if diff := cmp.Diff(codexAgentNew, plain.Agent.New); diff != "" {
		t.Errorf("teams.plain agent.new (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(codexAgentResume, plain.Agent.Resume); diff != "" {
		t.Errorf("teams.plain agent.resume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/opt/codex", "-m", "o9", "{prompt}"}, own.Agent.New); diff != "" {
		t.Errorf("teams.own agent.new (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(codexAgentResume, own.Agent.Resume); diff != "" {
		t.Errorf("teams.own agent.resume (-want +got):\n%s", diff)
	}

	path, _ = writeConfig(t, `
[defaults]
agent.kind = "codex"
agent.new = ["codex", "-m", "o9", "{prompt}"]

[teams.demo]
id = "`+demoID+`"
workspace = "@WS@"
`)
	if cfg, err = Load(path); err != nil {
		t.Fatalf("Load: %v", err)
	}
	demo, _ := cfg.Team("demo")
	if diff := cmp.Diff([]string{"codex", "-m", "o9", "{prompt}"}, demo.Agent.New); diff != "" {
		t.Errorf("inherited agent.new (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(codexAgentResume, demo.Agent.Resume); diff != "" {
		t.Errorf("inherited agent.resume (-want +got):\n%s", diff)
	}
}

// TestLoadKindByMode: agent.kind_by_mode gives modes another kind with
// that kind's default argvs; implement and retro must agree; a custom
// kind or an unknown mode is refused.
func TestLoadKindByMode(t *testing.T) {
	path, _ := writeConfig(t, `
[teams.demo]
id = "`+demoID+`"
workspace = "@WS@"
agent.new = ["/opt/claude", "--session-id", "{session_id}", "{prompt}"]
agent.kind_by_mode = { plan = "codex", review = "claude" }
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	demo, _ := cfg.Team("demo")
	plan := demo.Agent.ForMode("plan")
	if plan.Kind != AgentCodex || !slices.Equal(plan.New, codexAgentNew) || !slices.Equal(plan.Resume, codexAgentResume) {
		t.Errorf("ForMode(plan) = %+v; want kind codex with its default argvs", plan)
	}
	if impl := demo.Agent.ForMode("implement"); impl.Kind != AgentClaude || impl.New[0] != "/opt/claude" {
		t.Errorf("ForMode(implement) = %+v; want the team's own claude argv", impl)
	}
	if demo.Agent.New[0] != "/opt/claude" {
		t.Errorf("ForMode changed the team's agent: %v", demo.Agent.New)
	}
	for text, want := range map[string]string{
		`agent.kind_by_mode = { retro = "codex" }`: `teams.demo.agent.kind_by_mode: the retro (codex) resumes the implementer's (claude) conversation: give implement and retro the same kind`,
		`agent.kind_by_mode = { plan = "custom" }`: `teams.demo.agent.kind_by_mode: plan: unknown agent kind "custom": expected "claude", "codex", "gemini" or "opencode"`,
		`agent.kind_by_mode = { build = "codex" }`: `teams.demo.agent.kind_by_mode: unknown mode "build"`,
	} {
		path, _ := writeConfig(t, "[teams.demo]\nid = \""+demoID+"\"\nworkspace = \"@WS@\"\n"+text+"\n")
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s) = %v; want an error containing %q", text, err, want)
		}
	}
}

// TestLoadAgentEnv: agent.env gives every agent of the team more
// environment, agent.env_by_kind more to one kind's, which wins, and
// follows agent.kind_by_mode; bad names and values are refused by name.
func TestLoadAgentEnv(t *testing.T) {
	path, _ := writeConfig(t, `
[teams.demo]
id = "`+demoID+`"
workspace = "@WS@"
agent.kind_by_mode = { plan = "gemini" }
agent.env = { GOFLAGS = "-mod=mod", MODEL = "all" }
agent.env_by_kind = { gemini = { MODEL = "gemini-2.5-pro" }, codex = { X = "1" } }
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	demo, _ := cfg.Team("demo")
	if got, want := demo.Agent.ForMode("plan").Environment(), []string{"GOFLAGS=-mod=mod", "MODEL=gemini-2.5-pro"}; !slices.Equal(got, want) {
		t.Errorf("plan (gemini) environment = %q; want %q", got, want)
	}
	if got, want := demo.Agent.ForMode("implement").Environment(), []string{"GOFLAGS=-mod=mod", "MODEL=all"}; !slices.Equal(got, want) {
		t.Errorf("implement (claude) environment = %q; want %q", got, want)
	}
	for text, want := range map[string]string{
		`agent.env = { LEGION_TEAM = "x" }`:              `teams.demo.agent.env: LEGION_TEAM: LEGION_* variables are Legion's own`,
		`agent.env = { "1X" = "x" }`:                     `teams.demo.agent.env: "1X": not a variable name`,
		`agent.env = { X = 1 }`:                          `teams.demo.agent.env: X: `,
		`agent.env = ["X=1"]`:                            `teams.demo.agent.env: `,
		`agent.env_by_kind = { aider = { X = "1" } }`:    `teams.demo.agent.env_by_kind: unknown agent kind "aider"`,
		`agent.env_by_kind = { codex = { "A-B" = "" } }`: `teams.demo.agent.env_by_kind: codex: "A-B": not a variable name`,
	} {
		path, _ := writeConfig(t, "[teams.demo]\nid = \""+demoID+"\"\nworkspace = \"@WS@\"\n"+text+"\n")
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s) = %v; want an error containing %q", text, err, want)
		}
	}
}

// TestWorkerRelax: a team that runs Codex in any mode keeps the
// capability bounding set (its sandbox needs capabilities in a user
// namespace of its own), unless its hardening.add asks for an empty one;
// a team of Claude Code keeps its relax list as written.
func TestWorkerRelax(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"claude", `hardening.relax = ["ProtectClock"]`, []string{"ProtectClock"}},
		{"codex", `agent.kind = "codex"`, []string{"CapabilityBoundingSet"}},
		{"codex in one mode", `agent.kind_by_mode = { plan = "codex" }` + "\n" + `hardening.relax = ["ProtectClock"]`, []string{"ProtectClock", "CapabilityBoundingSet"}},
		{"codex, already relaxed", `agent.kind = "codex"` + "\n" + `hardening.relax = ["CapabilityBoundingSet"]`, []string{"CapabilityBoundingSet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := writeConfig(t, "[teams.demo]\nid = \""+demoID+"\"\nworkspace = \"@WS@\"\n"+tc.extra+"\n")
			cfg, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			demo, _ := cfg.Team("demo")
			if got := demo.WorkerRelax(); !slices.Equal(got, tc.want) {
				t.Errorf("WorkerRelax() = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestBudget: budget.* per team and in [defaults]; budget.prices merge
// over the shipped prices, which every team has without it.
func TestBudget(t *testing.T) {
	ws := t.TempDir()
	text := "[defaults]\nbudget.day_usd = 50\n\n[teams.a]\nid = \"" + demoID + "\"\nworkspace = \"" + ws + "\"\n" +
		"budget.issue_tokens = 2_000_000\nbudget.issue_usd = 2.5\nbudget.prices = { \"gpt-5\" = { input = 2, output = 20 }, \"my-model\" = { input = 1 } }\n"
	cfg, err := Parse(filepath.Join(ws, "legion.toml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Teams[0].Budget
	if b.IssueTokens != 2_000_000 || b.IssueUSD != 2.5 || b.DayUSD != 50 || b.DayTokens != 0 || !b.Any() {
		t.Errorf("budget = %+v; want issue 2M tokens and $2.5, day $50 from [defaults]", b)
	}
	if b.Prices["gpt-5"] != (Price{Input: 2, Output: 20}) || b.Prices["my-model"] != (Price{Input: 1}) || b.Prices["gemini-2.5-pro"] != DefaultPrices["gemini-2.5-pro"] {
		t.Errorf("prices = %v; want gpt-5 and my-model overridden, the shipped ones kept", b.Prices)
	}
	if DefaultPrices["gpt-5"].Input != 1.25 {
		t.Errorf("the shipped gpt-5 price changed to %v: budget.prices must not write into DefaultPrices", DefaultPrices["gpt-5"])
	}
	plain, err := Parse(filepath.Join(ws, "legion.toml"), []byte("[teams.a]\nid = \""+demoID+"\"\nworkspace = \""+ws+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if pb := plain.Teams[0].Budget; pb.Any() || len(pb.Prices) != len(DefaultPrices) {
		t.Errorf("a team without budget keys: %+v; want no limit and the shipped prices", pb)
	}
}
