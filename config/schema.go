package config

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/ptyworker/termkeys"
	"github.com/legion-dev/legion/units/hardening"
)

// Setting describes one key of legion.toml: where it goes, what it takes,
// its default and its documentation. [Schema] lists them all; the loader
// decodes with it and the legion.toml(5) man page is generated from it.
type Setting struct {
	// Table is the table holding the key: "helper", "worker" or
	// "teams.<name>". Team keys that are not PerTeam may also be set in
	// [defaults], which every team starts from.
	Table string
	// Key is the dotted key inside Table, e.g. "stale_after" or
	// "linear.team_key" (the key team_key of [teams.<name>.linear]).
	Key string
	// Type says what the value is, e.g. "duration" or "array of strings".
	Type string
	// Default is the built-in default as a TOML value; "" means unset.
	Default string
	// Example is a TOML value to show for a key without a Default.
	Example string
	// Doc explains the key, in sentences.
	Doc string
	// PerTeam keys are only valid in [teams.<name>], not in [defaults].
	PerTeam bool

	set func(dst, v any) error // decodes v into *Helper, *Worker or *Team
}

// Tables of the schema.
const (
	TableHelper = "helper"
	TableWorker = "worker"
	TableWeb    = "web"
	TableTeam   = "teams.<name>"
)

// Built-in defaults that are not obvious from the schema text.
var (
	defaultAgentNew    = []string{"claude", "--session-id", "{session_id}", "{prompt}"}
	defaultAgentResume = []string{"claude", "--resume", "{session_id}", "{prompt}"}
	// The other kinds' defaults are their pins' (agent/cliversion, KindArgv).
	codexAgentNew, codexAgentResume = cliversion.Codex.New, cliversion.Codex.Resume
)

// defaultHelper, defaultWorker and defaultTeam are the built-in defaults; a
// test checks they match Schema's Default texts.
func defaultHelper() Helper {
	return Helper{IdleExit: 5 * time.Minute, LogLevel: slog.LevelInfo}
}

func defaultWeb() Web {
	return Web{Address: "127.0.0.1", Port: 7787, IdleExit: 10 * time.Minute}
}

func defaultWorker() Worker {
	return Worker{RingSize: 1 << 20, DetachKey: termkeys.MustParseKey(termkeys.DefaultKey), StartupGrace: 2 * time.Minute}
}

func defaultTeam() Team {
	return Team{
		Tracker:            TrackerLocal,
		Review:             ReviewLocal,
		Controller:         ControllerAuto,
		Engine:             EngineSystemd,
		Kubernetes:         Kubernetes{Storage: "10Gi", CPURequest: "500m", MemoryRequest: "1Gi", MemoryLimit: "2Gi", BinDir: "/usr/local/bin"},
		StaleAfter:         10 * time.Minute,
		RestartCooldown:    30 * time.Second,
		StartLimitBurst:    5,
		StartLimitInterval: time.Hour,
		WIPLimit:           1,
		IdleGrace:          30 * time.Second,
		Budget:             Budget{Prices: maps.Clone(DefaultPrices)},
		Agent: Agent{
			Kind:        AgentClaude,
			New:         append([]string(nil), defaultAgentNew...),
			Resume:      append([]string(nil), defaultAgentResume...),
			Permissions: PermissionsSandbox,
		},
		Linear: Linear{
			APIKeyEnv:         "LINEAR_API_KEY",
			APIURL:            "https://api.linear.app/graphql",
			StatusTodo:        "Todo",
			StatusInProgress:  "In Progress",
			StatusNeedsReview: "Needs Review",
			StatusRetro:       "Retro",
			StatusDone:        "Done",
		},
		GitHub: GitHub{
			TokenEnv:           "GITHUB_TOKEN",
			APIURL:             "https://api.github.com/graphql",
			Label:              "legion",
			StatusTodo:         "legion:todo",
			StatusInProgress:   "legion:in-progress",
			StatusNeedsReview:  "legion:needs-review",
			StatusRetro:        "legion:retro",
			ProjectField:       "Status",
			ProjectTodo:        "Todo",
			ProjectInProgress:  "In Progress",
			ProjectNeedsReview: "Needs Review",
			ProjectRetro:       "Retro",
			ProjectDone:        "Done",
		},
	}
}

func onHelper(f func(*Helper, any) error) func(dst, v any) error {
	return func(dst, v any) error { return f(dst.(*Helper), v) }
}

func onWeb(f func(*Web, any) error) func(dst, v any) error {
	return func(dst, v any) error { return f(dst.(*Web), v) }
}

func onWorker(f func(*Worker, any) error) func(dst, v any) error {
	return func(dst, v any) error { return f(dst.(*Worker), v) }
}

func onTeam(f func(*Team, any) error) func(dst, v any) error {
	return func(dst, v any) error { return f(dst.(*Team), v) }
}

// teamString sets a string field of a team, requiring a non-empty value.
func teamString(field func(*Team) *string) func(dst, v any) error {
	return onTeam(func(t *Team, v any) error {
		s, err := nonEmptyString(v)
		*field(t) = s
		return err
	})
}

// teamPath sets an optional path field of a team ("~/" expanded).
func teamPath(field func(*Team) *string) func(dst, v any) error {
	return onTeam(func(t *Team, v any) error {
		s, err := pathValue(v)
		*field(t) = s
		return err
	})
}

// Schema is every key legion.toml knows, in the order the documentation
// presents them.
var Schema = []Setting{
	{
		Table: TableHelper, Key: "idle_exit", Type: "duration", Default: `"5m"`,
		Doc: "The helper (legion.service) exits after this long with no client and no work; " +
			"legion.socket starts it again on the next request, and nothing is lost. \"0\" keeps it running.",
		set: onHelper(func(h *Helper, v any) (err error) { h.IdleExit, err = durationValue(v, 0); return err }),
	},
	{
		Table: TableHelper, Key: "log_level", Type: `"debug", "info", "warn" or "error"`, Default: `"info"`,
		Doc: "The lowest level the helper and the controllers log to the journal.",
		set: onHelper(func(h *Helper, v any) error {
			s, err := stringValue(v)
			if err != nil {
				return err
			}
			if err := h.LogLevel.UnmarshalText([]byte(s)); err != nil {
				return fmt.Errorf(`invalid log level %q: expected "debug", "info", "warn" or "error"`, s)
			}
			return nil
		}),
	},
	{
		Table: TableHelper, Key: "session_limit", Type: "integer", Example: "8",
		Doc: "How many agent sessions of all teams may run at once on this machine, reviewers and " +
			"`legion spawn` sessions included. Every team's controller counts the sessions the helper lists " +
			"before it starts one, and an issue that would exceed it waits for room (`legion state` says so; " +
			"it is not stalled). Two controllers that tick at the same moment may each start one, so it can be " +
			"passed by one session per team for a tick. Unset: no cap (each team's wip_limit and session_limit, " +
			"and the memory check, still hold).",
		set: onHelper(func(h *Helper, v any) error {
			n, err := intValue(v, 1, 10000)
			h.SessionLimit = int(n)
			return err
		}),
	},
	{
		Table: TableWeb, Key: "address", Type: "IP address", Default: `"127.0.0.1"`,
		Doc: "The address legion-web.socket listens on for the dashboard (`legion web`). " +
			"Only this machine can reach 127.0.0.1 (or ::1); any other address lets other " +
			"machines reach the dashboard's login page, and `legion install` and `legion doctor` " +
			"warn about it. Every page still needs the token. From another machine, prefer " +
			"forwarding the unix socket $XDG_RUNTIME_DIR/legion/web.sock over SSH.",
		set: onWeb(func(w *Web, v any) error {
			s, err := stringValue(v)
			if err != nil {
				return err
			}
			if net.ParseIP(s) == nil {
				return fmt.Errorf("invalid address %q: expected an IP address such as \"127.0.0.1\" or \"::1\"", s)
			}
			w.Address = s
			return nil
		}),
	},
	{
		Table: TableWeb, Key: "port", Type: "integer", Default: "7787",
		Doc: "The TCP port legion-web.socket listens on, 1 to 65535. `legion install` writes it into the socket unit.",
		set: onWeb(func(w *Web, v any) error {
			n, err := intValue(v, 1, 65535)
			w.Port = int(n)
			return err
		}),
	},
	{
		Table: TableWeb, Key: "idle_exit", Type: "duration", Default: `"10m"`,
		Doc: "The dashboard's server (legion-web.service) exits after this long with no page " +
			"connected; legion-web.socket starts it again on the next request. \"0\" keeps it running.",
		set: onWeb(func(w *Web, v any) (err error) { w.IdleExit, err = durationValue(v, 0); return err }),
	},
	{
		Table: TableWorker, Key: "ring_size", Type: "size", Default: `"1M"`,
		Doc: "Scrollback each pty-worker keeps in memory for `legion attach` to replay, " +
			"in bytes or with a K, M or G suffix (base 1024). Between 4K and 256M. " +
			"An attached terminal that falls further behind the output than this is " +
			"dropped and catches up from a screen snapshot; the agent is never held up.",
		set: onWorker(func(w *Worker, v any) error {
			n, err := sizeValue(v)
			if err == nil && (n < proto.MinRingSize || n > proto.MaxRingSize) {
				err = fmt.Errorf("ring size %d bytes is out of range: expected between 4K and 256M", n)
			}
			w.RingSize = int(n)
			return err
		}),
	},
	{
		Table: TableWorker, Key: "detach_key", Type: "control key", Default: `"ctrl-\\"`,
		Doc: "The key that detaches `legion attach` from a session, as \"ctrl-\" and a letter, one of @ \\ ] ^ _, or space; " +
			"Tab, Enter, Backspace and Escape (ctrl-i, ctrl-j, ctrl-m, ctrl-h, ctrl-[) are refused. " +
			"Note that TOML needs the backslash doubled.",
		set: onWorker(func(w *Worker, v any) error {
			s, err := stringValue(v)
			if err != nil {
				return err
			}
			return w.DetachKey.UnmarshalText([]byte(s))
		}),
	},
	{
		Table: TableWorker, Key: "startup_grace", Type: "duration", Default: `"2m"`,
		Doc: "How long a freshly started agent may go without writing its session file " +
			"before the worker counts it as stale (stale_after applies from then on).",
		set: onWorker(func(w *Worker, v any) (err error) { w.StartupGrace, err = durationValue(v, 0); return err }),
	},
	{
		Table: TableTeam, Key: "id", Type: "UUID", PerTeam: true, Example: `"6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f"`,
		Doc: "The team's identity; required. Session IDs are derived from it (UUIDv5), and its " +
			"first 8 hex characters name the team's units and slice. `legion team add` writes a fresh one; " +
			"never change it while agents run.",
		set: onTeam(func(t *Team, v any) error {
			s, err := stringValue(v)
			if err != nil {
				return err
			}
			id, err := uuid.Parse(s)
			if err != nil || len(s) != 36 {
				return fmt.Errorf(`invalid UUID %q: expected the form "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"`, s)
			}
			if id == uuid.Nil {
				return fmt.Errorf("the nil UUID is not a team id: expected a random one (`legion team add` writes one)")
			}
			t.ID = id
			return nil
		}),
	},
	{
		Table: TableTeam, Key: "workspace", Type: "path", PerTeam: true, Example: `"~/src/demo"`,
		Doc: "The team's git repository; required, must exist. Absolute, or starting with ~/. " +
			"Each issue gets its own worktree of it.",
		set: onTeam(func(t *Team, v any) error {
			s, err := pathValue(v)
			if err != nil {
				return err
			}
			t.Workspace = s
			return checkDir(s)
		}),
	},
	{
		Table: TableTeam, Key: "issue_prefix", Type: "string", PerTeam: true, Example: `"DEMO"`,
		Doc: "Prefix of the local tracker's issue identifiers (DEMO gives DEMO-1): an uppercase " +
			"letter, then up to 9 uppercase letters or digits. Default: the team name's ASCII letters " +
			"and digits, uppercased, at most 10 (ISSUE when there are none).",
		set: onTeam(func(t *Team, v any) error {
			s, err := stringValue(v)
			if err != nil {
				return err
			}
			if !validIssuePrefix(s) {
				return fmt.Errorf("invalid issue prefix %q: expected an uppercase letter then up to 9 uppercase letters or digits, e.g. \"DEMO\"", s)
			}
			t.IssuePrefix = s
			return nil
		}),
	},
	{
		Table: TableTeam, Key: "tracker", Type: `"local", "linear" or "github"`, Default: `"local"`,
		Doc: "Where the team's issues live: \"local\", the embedded file-backed tracker driven by " +
			"`legion issue`, \"linear\" (configure [teams.<name>.linear]), or \"github\", the issues of " +
			"github.repo that carry github.label (configure [teams.<name>.github]; review is then \"github\" " +
			"unless set).",
		set: onTeam(func(t *Team, v any) error {
			s, err := enumValue(v, "tracker kind", string(TrackerLocal), string(TrackerLinear), string(TrackerGitHub))
			t.Tracker = TrackerKind(s)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "review", Type: `"local" or "github"`, Default: `"local"`,
		Doc: "Where review outcomes come from: \"local\", the labels worker-approved and " +
			"worker-changes-requested on the issue, or \"github\", the same labels on the pull request " +
			"of the issue's branch or a GitHub review (approve, request changes) of its head commit; Legion " +
			"pushes the branch with the team's GitHub token and opens the pull request when the " +
			"implementer runs `legion issue pr`, and merges through the API at finish (configure " +
			"[teams.<name>.github]).",
		set: onTeam(func(t *Team, v any) error {
			s, err := enumValue(v, "review source", string(ReviewLocal), string(ReviewGitHub))
			t.Review = ReviewKind(s)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "controller", Type: `"auto" or "agent"`, Default: `"auto"`,
		Doc: "What `legion controller TEAM` (legion@TEAM.service) runs: \"auto\", the built-in " +
			"deterministic loop, or \"agent\", a controller agent (the team's agent.kind, prompted with " +
			"the controller's instructions, legion instructions show TEAM controller) hosted in a pty-worker, one pass per turn: a Claude agent is " +
			"ended when its turn ends and resumed for the next pass after restart_cooldown.",
		set: onTeam(func(t *Team, v any) error {
			s, err := enumValue(v, "controller kind", string(ControllerAuto), string(ControllerAgent))
			t.Controller = ControllerKind(s)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "engine", Type: `"systemd" or "kubernetes"`, Default: `"systemd"`,
		Doc: "Where the team's agent sessions run: \"systemd\", a transient unit of your user manager per " +
			"session, or \"kubernetes\", a Job per session on a cluster, with a volume per issue " +
			"([teams.<name>.kubernetes]; README: Kubernetes). `legion sessions list` shows where each runs.",
		set: onTeam(func(t *Team, v any) error {
			s, err := enumValue(v, "engine", string(EngineSystemd), string(EngineKubernetes))
			t.Engine = EngineKind(s)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "kubernetes.kubeconfig", Type: "path", Example: `"~/.kube/config"`,
		Doc: "The kubeconfig the helper reads for the team's cluster. Unset: $KUBECONFIG of the user manager, else ~/.kube/config.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.Kubeconfig, err = pathValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.context", Type: "string", Example: `"prod"`,
		Doc: "The kubeconfig's context of the team's cluster. Unset: its current context.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.Context, err = nonEmptyString(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.namespace", Type: "string", Example: `"legion-demo"`,
		Doc: "The team's namespace (it must exist); required with engine = \"kubernetes\".",
		set: onTeam(func(t *Team, v any) error {
			s, err := nonEmptyString(v)
			if err == nil && !dnsLabel(s) {
				err = fmt.Errorf("invalid namespace %q: expected a DNS label (lower-case letters, digits and '-', at most 63)", s)
			}
			t.Kubernetes.Namespace = s
			return err
		}),
	},
	{
		Table: TableTeam, Key: "kubernetes.image", Type: "string", Example: `"registry.example/legion-worker:1.0"`,
		Doc: "The worker image: legion-pty-worker, legion and the team's agent CLIs (README: Kubernetes, the image); " +
			"required with engine = \"kubernetes\".",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.Image, err = nonEmptyString(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.storage_class", Type: "string", Example: `"standard"`,
		Doc: "The StorageClass of each issue's volume (worktree, agent session files, Legion's registry and transcript). Unset: the cluster's default.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.StorageClass, err = nonEmptyString(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.storage", Type: "quantity", Default: `"10Gi"`,
		Doc: "The size of each issue's volume.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.Storage, err = quantityValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.cpu_request", Type: "quantity", Default: `"500m"`,
		Doc: "The CPU each session's pod requests (the scheduler places it by this).",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.CPURequest, err = quantityValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.memory_request", Type: "quantity", Default: `"1Gi"`,
		Doc: "The memory each session's pod requests: a real agent's tree is 230 MB to 1 GB.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.MemoryRequest, err = quantityValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.cpu_limit", Type: "quantity", Example: `"2"`,
		Doc: "The CPU limit of each session's pod. Unset: none.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.CPULimit, err = quantityValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.memory_limit", Type: "quantity", Default: `"2Gi"`,
		Doc: "The memory limit of each session's pod (the kernel ends the agent beyond it, and the Job starts a new pod).",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.MemoryLimit, err = quantityValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.secret", Type: "string", Example: `"legion-demo-agents"`,
		Doc: "A Secret of the team's namespace mounted read-only into each session's pod at /run/secrets/legion, one file " +
			"per key (the agents' API keys): secrets never go into a pod's literal env, its argv or a log. Unset: none.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.Secret, err = nonEmptyString(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.secret_env", Type: "table of NAME = key", Example: `{ ANTHROPIC_API_KEY = "anthropic-api-key" }`,
		Doc: "Agent variables read from keys of the team's Secret (kubernetes.secret): each session's worker reads the key's " +
			"file at every start of the agent (and of its prepare commands) and sets the variable to its contents, a " +
			"trailing newline cut; the value is in no spec, argv or log. A key missing from the Secret keeps the agent from " +
			"starting (its Job fails for good, saying which). The way to give a cluster's agents their API keys (agent.env " +
			"is not for secrets). LEGION_* names are Legion's own and refused. Requires kubernetes.secret.",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.SecretEnv, err = secretEnvValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.repository", Type: "string", Example: `"https://git.example/demo.git"`,
		Doc: "The team's repository as its pods reach it (a git URL): each issue's pod clones it onto the issue's volume, " +
			"and the finisher merges into its default branch and pushes there. Legion gives that git no credentials (and it " +
			"never prompts): the pods must be able to fetch and push it as they are (README: Kubernetes). " +
			"Required by `legion controller` with engine = \"kubernetes\".",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.Repository, err = nonEmptyString(v); return err }),
	},
	{
		Table: TableTeam, Key: "kubernetes.bin_dir", Type: "path", Default: `"/usr/local/bin"`,
		Doc: "Where the worker image has legion and legion-pty-worker (what the agents' instructions and hooks run).",
		set: onTeam(func(t *Team, v any) (err error) { t.Kubernetes.BinDir, err = pathValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "stale_after", Type: "duration", Default: `"10m"`,
		Doc: "An agent with no session-file activity (subagents included) for this long, and not " +
			"waiting on a human, is stale: its worker stops feeding the watchdog and systemd restarts it, " +
			"resuming the same session.",
		set: onTeam(func(t *Team, v any) (err error) { t.StaleAfter, err = durationValue(v, time.Second); return err }),
	},
	{
		Table: TableTeam, Key: "idle_grace", Type: "duration", Default: `"30s"`,
		Doc: "How long an agent may sit idle at its prompt, its turn ended without the worker-done label, " +
			"before the controller escalates it to a person (user-input-needed, with what the agent last said). " +
			"An idle agent is not stale: it is never restarted for idling.",
		set: onTeam(func(t *Team, v any) (err error) { t.IdleGrace, err = durationValue(v, 0); return err }),
	},
	{
		Table: TableTeam, Key: "restart_cooldown", Type: "duration", Default: `"30s"`,
		Doc: "RestartSec= of the team's controller and workers: the pause before systemd restarts one; " +
			"\"0s\" restarts at once. It is the only source: legion@.service, the team's drop-in and every " +
			"worker the helper starts for the team get this value (the helper has no default of its own).",
		set: onTeam(func(t *Team, v any) (err error) { t.RestartCooldown, err = durationValue(v, 0); return err }),
	},
	{
		Table: TableTeam, Key: "start_limit_burst", Type: "integer", Default: "5",
		Doc: "StartLimitBurst=: more than this many starts within start_limit_interval and the unit " +
			"stays failed (until `systemctl --user reset-failed`).",
		set: onTeam(func(t *Team, v any) error {
			n, err := intValue(v, 1, 1000)
			t.StartLimitBurst = int(n)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "start_limit_interval", Type: "duration", Default: `"1h"`,
		Doc: "StartLimitIntervalSec=. Must be longer than start_limit_burst × restart_cooldown, since " +
			"restarts come at most once per cooldown and the limit could never trip. A restart for " +
			"staleness takes stale_after + restart_cooldown; to stop loops of agents that keep hanging too, " +
			"make it longer than start_limit_burst × (stale_after + restart_cooldown), as the default is.",
		set: onTeam(func(t *Team, v any) (err error) {
			t.StartLimitInterval, err = durationValue(v, time.Second)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "wip_limit", Type: "integer", Default: "1",
		Doc: "How many code workers of the team may run at once: agents in every mode but review " +
			"(reviewers are short-lived and exempt, as in the seed's rules).",
		set: onTeam(func(t *Team, v any) error {
			n, err := intValue(v, 1, 1000)
			t.WIPLimit = int(n)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "session_limit", Type: "integer", Example: "3",
		Doc: "How many of the team's agents may run at once in every mode, reviewers included (wip_limit " +
			"leaves them out). An issue whose next agent would exceed it waits for room: `legion state` and the " +
			"board say so, it is not stalled, and it is dispatched once an agent of the team ends. Unset: no cap " +
			"beyond wip_limit. Before any start the controller also checks memory: the room left (the machine's " +
			"MemAvailable, or what the team's memory_max leaves, whichever is less) must hold one more agent of " +
			"the team's expected size, which is the highest peak memory of its last finished agents, or " +
			"agent.memory_max before one has finished, or 1 GiB without either.",
		set: onTeam(func(t *Team, v any) error {
			n, err := intValue(v, 1, 1000)
			t.SessionLimit = int(n)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.new", Type: "array of strings",
		Default: `["claude", "--session-id", "{session_id}", "{prompt}"]`,
		Doc: "The argv that starts a new agent session (no shell: one string per argument). " +
			"Placeholders, replaced inside each argument: {session_id}, {prompt}, {issue}, {mode}, " +
			"{workspace}; {{ and }} are literal braces. A worker uses it when the session file does not exist yet. " +
			"A program named without a '/' is looked up in the PATH of the user manager (`systemctl --user show-environment`), " +
			"not of your shell; `legion team add` writes the absolute path it finds, and `legion doctor` checks what workers will find.",
		set: onTeam(func(t *Team, v any) (err error) { t.Agent.New, err = argvValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "agent.resume", Type: "array of strings",
		Default: `["claude", "--resume", "{session_id}", "{prompt}"]`,
		Doc:     "The argv that resumes an existing session (same placeholders as agent.new).",
		set:     onTeam(func(t *Team, v any) (err error) { t.Agent.Resume, err = argvValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "agent.kind", Type: `"claude", "codex", "gemini", "opencode" or "custom"`, Default: `"claude"`,
		Doc: "What the team's agents are. \"claude\": Claude Code. Before a worker starts, Legion writes the " +
			"session's own settings file (hooks that tell the worker the agent's state, the rules of " +
			"agent.permissions) and passes it as --settings FILE, just before the session flag of agent.new and " +
			"agent.resume (after the program when the argv has no {session_id}); it records in ~/.claude.json, " +
			"under a lock and keeping every other entry, the answers to the dialogs a new worktree would stop at " +
			"(onboarding done, the team's workspace trusted, which covers its worktrees, the auto-mode notices seen, " +
			"and the custom API key approved when ANTHROPIC_API_KEY is set for the agent); and it turns off the " +
			"CLI's non-essential network traffic. The worker then knows whether the agent works, idles at its prompt " +
			"or waits on a person, relays answers and approvals, and ends the agent cleanly once the issue has " +
			"worker-done and its turn is over. \"codex\": OpenAI's Codex CLI (npm @openai/codex; facts in " +
			"agent/codex/FACTS.md). Each conversation gets a Codex home of its own (CODEX_HOME, beside the " +
			"session's directory under Legion's state): your own config.toml ($CODEX_HOME, else ~/.codex) copied " +
			"with its hooks replaced by Legion's and the team's workspace trusted, and a link to your auth.json " +
			"when you ran `codex login`. Legion adds --no-daemon and --dangerously-bypass-hook-trust (the hooks are " +
			"its own) right after the program. The worker reads Codex's hooks as Claude Code's: state, approvals " +
			"held and answered, clean end once the phase is done. Codex picks its session ids itself: unless the " +
			"team sets them, agent.new is [\"codex\", \"{prompt}\"] and agent.resume [\"codex\", \"resume\", " +
			"\"--last\", \"{prompt}\"] (the last session of the conversation's own Codex home); a restart resumes " +
			"once Codex has written the home's history.jsonl (at the first prompt). Codex's question tool " +
			"(request_user_input) exists in its plan mode only: in the default mode Legion runs, a call of it fails at " +
			"once, so the agent asks in text and ends its turn, which the controller escalates. \"gemini\": Google's Gemini CLI (npm @google/gemini-cli; facts in " +
			"agent/gemini/FACTS.md). Each conversation gets a Gemini home of its own (GEMINI_CLI_HOME, beside the " +
			"session's directory under Legion's state): your own ~/.gemini/settings.json copied with its hooks replaced by " +
			"Legion's, the API key's auth type unless you chose another, no auto-update, update nag or usage statistics; " +
			"the worktree trusted; a link to your oauth_creds.json when you signed in with Google. The key comes from " +
			"GEMINI_API_KEY in the user manager's environment (`systemctl --user set-environment`) and is never written. " +
			"Unless the team sets them, agent.new is [\"gemini\", \"--session-id\", \"{session_id}\", \"{prompt}\"] and " +
			"agent.resume [\"gemini\", \"--resume\", \"{session_id}\", \"{prompt}\"]; a restart resumes once the CLI has " +
			"written the project's logs.json (at the first prompt). The worker reads its hooks as Claude Code's; its " +
			"approvals cannot be answered by a hook, so a person's answer is typed into its dialog. Its question " +
			"tool (ask_user), whose dialog no hook answers, is denied by a policy file Legion writes into the home: " +
			"the agent asks in text and ends its turn, which the controller escalates. \"opencode\": the opencode CLI (npm opencode-ai; facts in " +
			"agent/opencode/FACTS.md). Each conversation gets an opencode home of its own beside the session's " +
			"directory: an opencode.json passed as OPENCODE_CONFIG, which opencode merges over your own " +
			"~/.config/opencode/opencode.json (your provider, model and key stay yours: give the key by {env:VAR} " +
			"there, in the user manager's environment), with Legion's plugin and the permission rules of " +
			"agent.permissions; its own session database (OPENCODE_DB); and OPENCODE_DISABLE_AUTOUPDATE, " +
			"_MODELS_FETCH, _SHARE and _LSP_DOWNLOAD set. The plugin relays opencode's events to the worker as " +
			"Claude Code's hooks (state, permission requests held and answered through opencode's own API, turn " +
			"end), and records opencode's session id. Unless the team sets them, agent.new is [\"opencode\", " +
			"\"--prompt\", \"{prompt}\"] and agent.resume [\"opencode\", \"--continue\", \"--prompt\", " +
			"\"{prompt}\"] (the conversation's own last session, once its id is recorded; the plugin sends the " +
			"resumed prompt, which opencode ignores on the command line). Its question tool, whose dialog reaches no " +
			"plugin event, is denied by those permission rules: the agent asks in text and ends its turn, which the " +
			"controller escalates. " +
			"\"custom\": any terminal program, run as agent.new says: no settings, " +
			"no session file (agent.resume is unused), liveness from its output, and no completion detection: " +
			"the program must exit by itself when its phase is done.",
		set: onTeam(func(t *Team, v any) error {
			s, err := agentKindValue(v)
			t.Agent.Kind = AgentKind(s)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.permissions", Type: `"sandbox", "allowlist", "ask" or "bypass"`, Default: `"sandbox"`,
		Doc: "Which tool calls of an agent run without asking a person, and where it may act. " +
			"\"sandbox\" (the default): nothing is asked (as with \"bypass\", for every kind), and the kernel confines " +
			"the agent and all it starts (Landlock, which needs no user namespace, so it holds on Ubuntu 24.04 too): " +
			"it writes only the issue's worktree, the git objects and refs a commit needs (not the repository's " +
			"files, .git/config or hooks), its own state (~/.claude, ~/.claude.json, the conversation's home), the " +
			"toolchains' caches (~/.cache with Go's and pip's, the Go module cache, ~/.npm, cargo's registry) and " +
			"/tmp; it reads the rest of the system and the home but not ~/.ssh, ~/.gnupg, other tools' credentials " +
			"(~/.aws, gh's, docker's, kube's, ~/.netrc, ...), other kinds' logins, nor Legion's state (every " +
			"session's spec and token, the trackers), config directory and tracker credentials files; its " +
			"`legion issue` commands go through its worker, for its " +
			"own issue only; Legion's helper and other sessions' workers refuse it. Where it cannot hold (no " +
			"Landlock, or older than ABI 3: Linux 6.2; a home below /tmp), for the finisher (it merges into the " +
			"main checkout) and the controller agent, the agent runs as under \"allowlist\", and the controller " +
			"logs why. Unix sockets by path (the user's D-Bus and systemd, tmux, ssh-agent) stay reachable below " +
			"Landlock ABI 9. " +
			"Which tool calls of a claude agent run without asking a person (a custom agent is not asked about). " +
			"\"allowlist\": Legion's own commands that the instructions name (legion issue, legion state, " +
			"legion worktree finish, by name and by legion's absolute path), git (any git command: Claude Code's " +
			"rules match the command, not its directory), reading and editing files inside the issue's worktree, and " +
			"the rules of agent.allow. \"ask\": only legion issue (the agent must be able to report). " +
			"Those of Legion's commands run unasked in whatever form the model writes them, when they are for the " +
			"session's own team and issue: a variable ($LEGION_TEAM, \"${LEGION_ISSUE}\") defeats the CLI's own " +
			"rules, which read text, so the CLI asks, and the worker answers allow at once in the permission hook " +
			"for exactly legion issue show|comment|label|unlabel|move TEAM ISSUE …, legion state TEAM [--json] and " +
			"legion worktree finish TEAM ISSUE (ask: legion issue only), written as one command with nothing but " +
			"quotes, the variables LEGION_TEAM, LEGION_ISSUE and LEGION_MODE and a text as a here-document " +
			"(\"$(cat <<'EOF' … EOF)\", the delimiter quoted); not another command, a pipe, a redirection, another " +
			"substitution or variable, nor another issue or team: those wait for a person. " +
			"In both, every other call waits for a person: the worker shows it as waiting_permission and the " +
			"controller escalates it with the tool and the exact command. \"bypass\": nothing is asked (Claude Code's " +
			"bypassPermissions mode, with its warning pre-answered and, as root, IS_SANDBOX=1): the agent may run any " +
			"command with your rights, change files outside its worktree and reach the network; use it only on a " +
			"disposable machine. The rules go in the session's settings file, with --permission-mode manual " +
			"(allowlist, ask) or bypassPermissions; your own Claude Code settings still add their rules. " +
			"A codex agent: \"bypass\" adds --dangerously-bypass-approvals-and-sandbox (nothing asked, no sandbox); " +
			"\"allowlist\" and \"ask\" run Codex's own workspace-write sandbox, widened to the repository's git directory " +
			"(a commit in the worktree writes it) and the network (Legion's own commands reach the session's worker over a unix socket; " +
			"a command the model must run outside it waits for a person and is escalated as for Claude Code); agent.allow is not used. " +
			"A gemini agent: \"bypass\" adds --approval-mode yolo; \"allowlist\" allows the shell commands legion " +
			"issue, legion state and legion worktree finish (by name and absolute path; the CLI's prefixes match " +
			"a command with variables too) and git and the file edits (which the Gemini CLI keeps to the worktree), " +
			"\"ask\" only legion issue, besides what the CLI runs unasked (reading files): a policy file of its " +
			"policy engine in the conversation's Gemini home; every other call opens its dialog, is escalated, and " +
			"a person's answer is typed into it (the worker types the allow itself for Legion's own commands); " +
			"agent.allow is not used, nor your own ~/.gemini/policies. " +
			"An opencode agent: \"bypass\" adds --auto and allows every permission; \"allowlist\" allows legion's " +
			"commands, git, file edits inside the worktree and agent.allow's Bash rules, and asks for every other " +
			"command, outside directory and web fetch; \"ask\" allows only legion issue. A request that asks is " +
			"escalated as for Claude Code.",
		set: onTeam(func(t *Team, v any) error {
			p, err := policyValue(v)
			t.Agent.Permissions = p
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.permissions_by_mode", Type: "table of mode = policy", Example: `{ finish = "ask" }`,
		Doc: "agent.permissions for some modes only: keys plan, implement, review, retro and finish, values as " +
			"for agent.permissions, e.g. { finish = \"ask\" } to approve every command of the phase that merges. " +
			"Unset: every mode has agent.permissions.",
		set: onTeam(func(t *Team, v any) error {
			m, err := policyByModeValue(v)
			t.Agent.PermissionsByMode = m
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.kind_by_mode", Type: "table of mode = kind", Example: `{ plan = "codex" }`,
		Doc: "Another agent kind for some modes: keys plan, implement, review, retro and finish, values \"claude\", " +
			"\"codex\", \"gemini\" or \"opencode\", e.g. { plan = \"codex\", review = \"codex\" } to plan and review with Codex and implement " +
			"with Claude Code. Such a mode runs with its kind's default agent.new and agent.resume (the program " +
			"looked up in the user manager's PATH), and the team's agent.permissions. The retro resumes the " +
			"implementer's conversation, so implement and retro must have the same kind. Unset: every mode has agent.kind.",
		set: onTeam(func(t *Team, v any) error {
			m, err := kindByModeValue(v)
			t.Agent.KindByMode = m
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.env", Type: "table of NAME = value", Example: `{ GOFLAGS = "-mod=mod" }`,
		Doc: "More environment for every agent of the team, besides the user manager's (which every worker " +
			"inherits) and what its kind sets itself (a kind's own variables, such as CODEX_HOME or " +
			"GEMINI_CLI_HOME, win). Not for secrets: legion.toml is a file people share and copy; give API keys " +
			"to the user manager (`systemctl --user set-environment NAME=...` or an environment.d file). LEGION_* " +
			"names are Legion's own and refused.",
		set: onTeam(func(t *Team, v any) error {
			m, err := envValue(v)
			t.Agent.Env = m
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.env_by_kind", Type: "table of kind = { NAME = value }",
		Example: `{ gemini = { GEMINI_MODEL = "gemini-2.5-pro" } }`,
		Doc: "More environment for the agents of one kind (\"claude\", \"codex\", \"gemini\", \"opencode\" or " +
			"\"custom\"), over agent.env: with agent.kind_by_mode, the modes run with a kind get its variables, so " +
			"a phase's environment follows the agent that runs it. Same rules as agent.env.",
		set: onTeam(func(t *Team, v any) error {
			m, err := envByKindValue(v)
			t.Agent.EnvByKind = m
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.allow", Type: "array of strings", Example: `["Bash(make test)", "Bash(go test:*)"]`,
		Doc: "More tool calls a claude agent may make without asking, with the allowlist policy: permission rules " +
			"in Claude Code's syntax, a tool name with an optional specifier in parentheses: \"Bash(make test)\" " +
			"(that command), \"Bash(npm run test:*)\" (commands starting so), \"WebFetch(domain:example.com)\". " +
			"Unset: none.",
		set: onTeam(func(t *Team, v any) (err error) { t.Agent.Allow, err = rulesValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "agent.instructions_dir", Type: "path", Example: `"~/src/web/.legion/instructions"`,
		Doc: "A directory of your own instructions for the team's agents, replacing Legion's built-in ones " +
			"phase by phase: plan.md, implement.md, review.md, retro.md, finish.md and controller.md, each a Go " +
			"text/template rendered with .Team, .Issue, .Mode, .Role, .Branch, .Worktree, .Base, .Review, .AskTool " +
			"and .Legion (`legion instructions show TEAM MODE` prints the built-in one to start from). A file that " +
			"is missing keeps the built-in text. A template that loses a command its phase must run (worker-done; " +
			"the review's two outcome labels; the finisher's worktree finish; the controller's state) is refused " +
			"with the file and the command (so is a directory that does not exist), when the controller or a dispatch loads them and by legion doctor. Unset: the built-in " +
			"instructions.",
		set: onTeam(func(t *Team, v any) error {
			s, err := pathValue(v)
			if err != nil {
				return err
			}
			t.Agent.InstructionsDir = s
			return nil
		}),
	},
	{
		Table: TableTeam, Key: "memory_max", Type: "size", Example: `"4G"`,
		Doc: "MemoryMax= of the team's slice (all its agents together), in bytes or with a " +
			"K, M, G or T suffix (base 1024), e.g. \"4G\". Unset: no limit.",
		set: onTeam(func(t *Team, v any) error {
			n, err := sizeValue(v)
			if err == nil && n == 0 {
				err = fmt.Errorf("memory_max 0 would stop every agent: expected a size such as \"4G\", or leave it unset")
			}
			t.MemoryMax = n
			return err
		}),
	},
	{
		Table: TableTeam, Key: "cpu_quota", Type: "percentage", Example: `"200%"`,
		Doc: "CPUQuota= of the team's slice, e.g. \"200%\" for two CPUs' worth. Unset: no limit.",
		set: onTeam(func(t *Team, v any) error {
			s, err := stringValue(v)
			if err != nil {
				return err
			}
			t.CPUQuotaPercent, err = ParsePercent(s)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "tasks_max", Type: "integer", Example: "512",
		Doc: "TasksMax= of the team's slice: processes and threads of all its agents together. " +
			"Unset: systemd's default.",
		set: onTeam(func(t *Team, v any) error {
			n, err := intValue(v, 1, 1<<31)
			t.TasksMax = uint64(n)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.memory_max", Type: "size", Example: `"2G"`,
		Doc: "MemoryMax= of each agent's own worker unit, in bytes or with a K, M, G or T suffix (base 1024): " +
			"an agent that needs more is killed by the kernel alone (its neighbours untouched), and systemd " +
			"restarts it and resumes its session like after any failure. Unset: no limit of its own " +
			"(the team's memory_max still holds). Enforced only where the user manager has cgroup2's memory " +
			"controller; `legion doctor` says when it has not.",
		set: onTeam(func(t *Team, v any) error {
			n, err := sizeValue(v)
			if err == nil && n == 0 {
				err = fmt.Errorf("agent.memory_max 0 would kill every agent at start: expected a size such as \"2G\", or leave it unset")
			}
			t.Agent.MemoryMax = n
			return err
		}),
	},
	{
		Table: TableTeam, Key: "agent.cpu_weight", Type: "integer", Example: "100",
		Doc: "CPUWeight= of each agent's worker unit, 1 to 10000: its share of the CPU against the other " +
			"agents when the CPU is busy (systemd's default is 100; 50 gets half as much). Unset: the default. " +
			"Enforced only where the user manager has cgroup2's cpu controller.",
		set: onTeam(func(t *Team, v any) error {
			n, err := intValue(v, 1, 10000)
			t.Agent.CPUWeight = int(n)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "hardening.relax", Type: "array of strings", Example: `["PrivateDevices"]`,
		Doc: "Sandboxing directives to take out of the team's worker units (systemd.exec(5)); each worker, " +
			"the agent's home, has by default only what an agent cannot need: " + directiveList(hardening.WorkerDefaults()) +
			" Relaxing PrivateUsers requires relaxing every directive marked \"needs PrivateUsers\", " +
			"which a user manager ignores or refuses without it. Applied by `legion install`, to workers started after it; " +
			"install leaves out, and names, any directive this host's user manager cannot apply (see legion-install(1)).",
		set: onTeam(func(t *Team, v any) (err error) {
			t.Hardening.Relax, err = directivesValue(v, "relax", hardening.WorkerDefaults())
			return err
		}),
	},
	{
		Table: TableTeam, Key: "hardening.add", Type: "array of strings", Example: `["PrivateTmp", "SystemCallArchitectures"]`,
		Doc: "Sandboxing directives to add to the team's worker units, each of which takes away something " +
			"some agents need: " + directiveList(hardening.WorkerOptional()) +
			" Applied by `legion install`, to workers started after it; " +
			"one this host's user manager cannot apply is left out, and named.",
		set: onTeam(func(t *Team, v any) (err error) {
			t.Hardening.Add, err = directivesValue(v, "add", hardening.WorkerAddable())
			return err
		}),
	},
	{
		Table: TableTeam, Key: "linear.team_key", Type: "string", Example: `"ENG"`,
		Doc: "The Linear team's key, e.g. \"ENG\"; required when tracker = \"linear\".",
		set: teamString(func(t *Team) *string { return &t.Linear.TeamKey }),
	},
	{
		Table: TableTeam, Key: "linear.api_key_env", Type: "string", Default: `"LINEAR_API_KEY"`,
		Doc: "The environment variable holding the Linear API key. Keys never go in this file, " +
			"on command lines or in unit properties.",
		set: teamString(func(t *Team) *string { return &t.Linear.APIKeyEnv }),
	},
	{
		Table: TableTeam, Key: "linear.credentials_file", Type: "path", Example: `"~/.config/legion/linear-api-key"`,
		Doc: "A file (mode 0600) holding the Linear API key, read when the environment variable is unset.",
		set: teamPath(func(t *Team) *string { return &t.Linear.CredentialsFile }),
	},
	{
		Table: TableTeam, Key: "linear.api_url", Type: "string", Default: `"https://api.linear.app/graphql"`,
		Doc: "Linear's GraphQL endpoint.",
		set: teamString(func(t *Team) *string { return &t.Linear.APIURL }),
	},
	{
		Table: TableTeam, Key: "linear.status_todo", Type: "string", Default: `"Todo"`,
		Doc: "The Linear workflow state Legion reads as Todo.",
		set: teamString(func(t *Team) *string { return &t.Linear.StatusTodo }),
	},
	{
		Table: TableTeam, Key: "linear.status_in_progress", Type: "string", Default: `"In Progress"`,
		Doc: "The Linear workflow state Legion reads as In Progress.",
		set: teamString(func(t *Team) *string { return &t.Linear.StatusInProgress }),
	},
	{
		Table: TableTeam, Key: "linear.status_needs_review", Type: "string", Default: `"Needs Review"`,
		Doc: "The Linear workflow state Legion reads as Needs Review.",
		set: teamString(func(t *Team) *string { return &t.Linear.StatusNeedsReview }),
	},
	{
		Table: TableTeam, Key: "linear.status_retro", Type: "string", Default: `"Retro"`,
		Doc: "The Linear workflow state Legion reads as Retro.",
		set: teamString(func(t *Team) *string { return &t.Linear.StatusRetro }),
	},
	{
		Table: TableTeam, Key: "linear.status_done", Type: "string", Default: `"Done"`,
		Doc: "The Linear workflow state Legion reads as Done.",
		set: teamString(func(t *Team) *string { return &t.Linear.StatusDone }),
	},
	{
		Table: TableTeam, Key: "github.repo", Type: "string", Example: `"example/demo"`,
		Doc: "The GitHub repository as \"owner/name\"; required when review = \"github\". Legion pushes " +
			"issue branches to it over HTTPS (https://github.com/owner/name.git, or the host of api_url).",
		set: onTeam(func(t *Team, v any) error {
			s, err := stringValue(v)
			if err != nil {
				return err
			}
			if !validRepo(s) {
				return fmt.Errorf("invalid repository %q: expected \"owner/name\"", s)
			}
			t.GitHub.Repo = s
			return nil
		}),
	},
	{
		Table: TableTeam, Key: "github.token_env", Type: "string", Default: `"GITHUB_TOKEN"`,
		Doc: "The environment variable holding the GitHub token (it needs contents, pull requests and issues " +
			"write on the repository: Legion pushes the branches, opens, labels and merges the pull requests, and " +
			"with tracker = \"github\" labels, comments on and closes the issues; legion doctor checks).",
		set: teamString(func(t *Team) *string { return &t.GitHub.TokenEnv }),
	},
	{
		Table: TableTeam, Key: "github.credentials_file", Type: "path", Example: `"~/.config/legion/github-token"`,
		Doc: "A file (mode 0600) holding the GitHub token, read when the environment variable is unset.",
		set: teamPath(func(t *Team) *string { return &t.GitHub.CredentialsFile }),
	},
	{
		Table: TableTeam, Key: "github.webhook_secret_file", Type: "path", Example: `"~/.config/legion/github-webhook-secret"`,
		Doc: "A file (mode 0600) holding the secret of the repository's GitHub webhook. When set, the " +
			"dashboard (legion-web) accepts GitHub's signed events at POST /hooks/github/<team> and wakes " +
			"the team's controller at once; the controller still polls at its interval. Requires github.repo.",
		set: teamPath(func(t *Team) *string { return &t.GitHub.WebhookSecretFile }),
	},
	{
		Table: TableTeam, Key: "github.api_url", Type: "string", Default: `"https://api.github.com/graphql"`,
		Doc: "GitHub's GraphQL endpoint (GitHub Enterprise: https://HOST/api/graphql).",
		set: teamString(func(t *Team) *string { return &t.GitHub.APIURL }),
	},
	{
		Table: TableTeam, Key: "github.label", Type: "string", Default: `"legion"`,
		Doc: "With tracker = \"github\": the label that opts an issue in. Legion takes the open issues " +
			"that carry it and never touches the others.",
		set: teamString(func(t *Team) *string { return &t.GitHub.Label }),
	},
	{
		Table: TableTeam, Key: "github.status_todo", Type: "string", Default: `"legion:todo"`,
		Doc: "With tracker = \"github\": the label of Todo (an opted-in issue with no status label is in Todo too).",
		set: teamString(func(t *Team) *string { return &t.GitHub.StatusTodo }),
	},
	{
		Table: TableTeam, Key: "github.status_in_progress", Type: "string", Default: `"legion:in-progress"`,
		Doc: "With tracker = \"github\": the label of In Progress.",
		set: teamString(func(t *Team) *string { return &t.GitHub.StatusInProgress }),
	},
	{
		Table: TableTeam, Key: "github.status_needs_review", Type: "string", Default: `"legion:needs-review"`,
		Doc: "With tracker = \"github\": the label of Needs Review.",
		set: teamString(func(t *Team) *string { return &t.GitHub.StatusNeedsReview }),
	},
	{
		Table: TableTeam, Key: "github.status_retro", Type: "string", Default: `"legion:retro"`,
		Doc: "With tracker = \"github\": the label of Retro. Done is a closed issue: Legion closes it when " +
			"the pull request is merged.",
		set: teamString(func(t *Team) *string { return &t.GitHub.StatusRetro }),
	},
	{
		Table: TableTeam, Key: "github.project", Type: "integer", Example: "3",
		Doc: "With tracker = \"github\": the number of a project (Projects v2, .../projects/N) of the " +
			"repository's owner whose single-select field github.project_field holds each issue's phase, " +
			"instead of the status labels. An opted-in issue not in the project is in Todo; Legion adds it " +
			"when it moves it. Checked at the first tick: a project, field or option that is not there is " +
			"an error naming it. A classic token needs the project scope.",
		set: onTeam(func(t *Team, v any) error {
			n, err := intValue(v, 1, 1<<31)
			t.GitHub.Project = int(n)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "github.project_field", Type: "string", Default: `"Status"`,
		Doc: "With github.project: the single-select field that holds the phase.",
		set: teamString(func(t *Team) *string { return &t.GitHub.ProjectField }),
	},
	{
		Table: TableTeam, Key: "github.project_todo", Type: "string", Default: `"Todo"`,
		Doc: "With github.project: the field's option of Todo.",
		set: teamString(func(t *Team) *string { return &t.GitHub.ProjectTodo }),
	},
	{
		Table: TableTeam, Key: "github.project_in_progress", Type: "string", Default: `"In Progress"`,
		Doc: "With github.project: the field's option of In Progress.",
		set: teamString(func(t *Team) *string { return &t.GitHub.ProjectInProgress }),
	},
	{
		Table: TableTeam, Key: "github.project_needs_review", Type: "string", Default: `"Needs Review"`,
		Doc: "With github.project: the field's option of Needs Review.",
		set: teamString(func(t *Team) *string { return &t.GitHub.ProjectNeedsReview }),
	},
	{
		Table: TableTeam, Key: "github.project_retro", Type: "string", Default: `"Retro"`,
		Doc: "With github.project: the field's option of Retro.",
		set: teamString(func(t *Team) *string { return &t.GitHub.ProjectRetro }),
	},
	{
		Table: TableTeam, Key: "github.project_done", Type: "string", Default: `"Done"`,
		Doc: "With github.project: the field's option of Done (Legion closes the issue too).",
		set: teamString(func(t *Team) *string { return &t.GitHub.ProjectDone }),
	},
	{
		Table: TableTeam, Key: "github.merge_method", Type: `"merge", "squash" or "rebase"`, Example: `"squash"`,
		Doc: "How the finisher merges a pull request; the repository must allow it (a method it does not " +
			"allow stops the finish with an error naming the ones it does). Unset: the first the repository " +
			"allows of merge, squash and rebase.",
		set: onTeam(func(t *Team, v any) error {
			s, err := enumValue(v, "merge method", "merge", "squash", "rebase")
			t.GitHub.MergeMethod = s
			return err
		}),
	},
	{
		Table: TableTeam, Key: "notify.webhook_url", Type: "URL", Example: `"https://hooks.example.net/legion"`,
		Doc: "When something waits for a person (a question, a permission, an unfinished turn, a failed worker), " +
			"POST a JSON message to this URL, signed with HMAC-SHA256 (headers X-Legion-Timestamp and " +
			"X-Legion-Signature: sha256=<hex of HMAC(secret, timestamp + \".\" + body)>; README: Operations: " +
			"notifications). Requires notify.webhook_secret_env or notify.webhook_secret_file.",
		set: onTeam(func(t *Team, v any) (err error) { t.Notify.WebhookURL, err = httpURLValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "notify.webhook_secret_env", Type: "string", Example: `"LEGION_WEBHOOK_SECRET"`,
		Doc: "The environment variable (of the user manager, which the controller gets) holding the webhook's " +
			"signing secret; it wins over notify.webhook_secret_file.",
		set: teamString(func(t *Team) *string { return &t.Notify.WebhookSecretEnv }),
	},
	{
		Table: TableTeam, Key: "notify.webhook_secret_file", Type: "path", Example: `"~/.config/legion/notify-webhook-secret"`,
		Doc: "A file (mode 0600) holding the webhook's signing secret on its first line.",
		set: teamPath(func(t *Team) *string { return &t.Notify.WebhookSecretFile }),
	},
	{
		Table: TableTeam, Key: "notify.ntfy_url", Type: "URL", Example: `"https://ntfy.sh/legion-demo-7f3a"`,
		Doc: "An ntfy topic (https://HOST/TOPIC, ntfy.sh or a server of your own) that gets a message per wait, " +
			"its click opening the issue's card in the dashboard. On a public server the topic name is its only " +
			"password: pick one nobody guesses, or use an access token.",
		set: onTeam(func(t *Team, v any) (err error) { t.Notify.NtfyURL, err = httpURLValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "notify.ntfy_token_env", Type: "string", Example: `"NTFY_TOKEN"`,
		Doc: "The environment variable holding an ntfy access token (sent as Authorization: Bearer); it wins " +
			"over notify.ntfy_token_file. Neither: the topic is published to without one.",
		set: teamString(func(t *Team) *string { return &t.Notify.NtfyTokenEnv }),
	},
	{
		Table: TableTeam, Key: "notify.ntfy_token_file", Type: "path", Example: `"~/.config/legion/ntfy-token"`,
		Doc: "A file (mode 0600) holding an ntfy access token on its first line.",
		set: teamPath(func(t *Team) *string { return &t.Notify.NtfyTokenFile }),
	},
	{
		Table: TableTeam, Key: "notify.desktop", Type: "boolean", Default: "false",
		Doc: "Show each wait on the desktop (org.freedesktop.Notifications on the user's session bus) where a " +
			"session bus is present; without one it is skipped.",
		set: onTeam(func(t *Team, v any) error {
			b, ok := v.(bool)
			if !ok {
				return wrongType("true or false", v)
			}
			t.Notify.Desktop = b
			return nil
		}),
	},
	{
		Table: TableTeam, Key: "notify.dashboard_url", Type: "URL", Example: `"https://legion.example.net"`,
		Doc: "The dashboard as the person reaches it, the base of the links in notifications " +
			"(<dashboard_url>/#needs/<team>/<issue>). Unset: http://<[web] address>:<[web] port>.",
		set: onTeam(func(t *Team, v any) (err error) { t.Notify.DashboardURL, err = httpURLValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "budget.issue_tokens", Type: "integer", Default: "0",
		Doc: "The tokens (input, output, cache reads and writes, as the agents record them) all phases of one issue may " +
			"use; 0 is no limit. When a phase crosses it, its agent is ended once its turn ends and the issue escalated " +
			"with the spend per phase (README: Operations: budgets). The label budget-approved on the issue lets it go on.",
		set: onTeam(func(t *Team, v any) (err error) {
			t.Budget.IssueTokens, err = intValue(v, 0, maxBudgetTokens)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "budget.issue_usd", Type: "number", Default: "0",
		Doc: "The cost in US dollars all phases of one issue may reach (what the agent reports, else its tokens at " +
			"budget.prices); 0 is no limit. Crossed: as budget.issue_tokens.",
		set: onTeam(func(t *Team, v any) (err error) { t.Budget.IssueUSD, err = usdValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "budget.day_tokens", Type: "integer", Default: "0",
		Doc: "The tokens the team's agents may use in one day (local time); 0 is no limit. Over it, no new agent is " +
			"started until the next day or a higher limit (running ones finish their phase).",
		set: onTeam(func(t *Team, v any) (err error) {
			t.Budget.DayTokens, err = intValue(v, 0, maxBudgetTokens)
			return err
		}),
	},
	{
		Table: TableTeam, Key: "budget.day_usd", Type: "number", Default: "0",
		Doc: "The cost in US dollars the team's agents may reach in one day (local time); 0 is no limit. Over it: as " +
			"budget.day_tokens.",
		set: onTeam(func(t *Team, v any) (err error) { t.Budget.DayUSD, err = usdValue(v); return err }),
	},
	{
		Table: TableTeam, Key: "budget.prices", Type: "table", Example: `{ "gpt-5" = { input = 1.25, output = 10, cache_read = 0.125 } }`,
		Doc: "USD per million tokens by model (input, output, cache_read, cache_write; a key prices every model whose " +
			"name starts with it, the longest key wins), over Legion's shipped prices (dated and sourced in the README), " +
			"for agents that record no cost (Codex, the Gemini CLI).",
		set: onTeam(func(t *Team, v any) (err error) { t.Budget.Prices, err = pricesValue(v); return err }),
	},
}
