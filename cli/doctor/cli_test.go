package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/confine"
	"github.com/legion-dev/legion/units/sdtest"
)

// parseTeam is team "demo" of a legion.toml with the given lines in its
// table, as config reads it (defaults filled in).
func parseTeam(t *testing.T, extra string) config.Team {
	t.Helper()
	text := fmt.Sprintf("[teams.demo]\nid = \"6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f\"\nworkspace = %q\n%s", t.TempDir(), extra)
	cfg, err := config.Parse("/cfg/legion.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Teams[0]
}

// realCLIs makes a directory in which each named kind's default program
// is the real, pinned CLI (claudetest.Binary and its siblings: a missing
// one skips the test, or fails it with CI=true), and returns a worker
// environment whose PATH starts with it (then this process's PATH, for
// node) and whose HOME is an empty directory.
func realCLIs(t *testing.T, kinds ...config.AgentKind) workerEnv {
	t.Helper()
	dir := t.TempDir()
	for _, k := range kinds {
		cli, _ := cliversion.For(string(k))
		var bin string
		switch k {
		case config.AgentClaude:
			bin = claudetest.Binary(t)
		case config.AgentCodex:
			bin = codextest.Binary(t)
		case config.AgentGemini:
			bin = geminitest.Binary(t)
		case config.AgentOpencode:
			bin = opencodetest.Binary(t)
		}
		if err := os.Symlink(bin, filepath.Join(dir, cli.Program)); err != nil {
			t.Fatal(err)
		}
	}
	return workerEnv{env: []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}}
}

// TestKindByMode: a team that plans with Codex (agent.kind_by_mode) and
// finishes under "ask" (agent.permissions_by_mode) gets, besides its
// Claude Code checks, Codex's version and credentials checks, and its
// permissions check names each mode's policy and kind. The CLIs are the
// real ones.
func TestKindByMode(t *testing.T) {
	team := parseTeam(t, "agent.permissions = \"allowlist\"\nagent.kind_by_mode = { plan = \"codex\" }\nagent.permissions_by_mode = { finish = \"ask\" }\n")
	w := realCLIs(t, config.AgentClaude, config.AgentCodex)
	opts := Options{ConfigPath: "/cfg/legion.toml"}.withDefaults()
	checks := teamChecks(t.Context(), opts, team, w, versionCache{})

	var names []string
	for _, c := range checks {
		names = append(names, c.Name)
	}
	want := []string{"agent of team demo", "permissions of team demo", "capacity of team demo", "codex version of team demo",
		"codex credentials of team demo", "claude version of team demo"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("checks of a team with kind_by_mode (-want +got):\n%s", diff)
	}
	expect(t, find(t, checks, policyCheckName("demo")), OK,
		"allowlist in plan (codex): what Codex's own workspace-write sandbox allows", "")
	expect(t, find(t, checks, policyCheckName("demo")), OK,
		"; allowlist in implement, review, retro (claude): Legion's own commands, git, file edits in the worktree and agent.allow, "+
			"anything else waits for a person; ask in finish (claude): only legion issue, every other call waits for a person", "")
	expect(t, find(t, checks, cliCheckName("demo", config.AgentCodex)), OK, "Codex "+cliversion.CodexTested+" at ", "")
	expect(t, find(t, checks, cliCheckName("demo", config.AgentClaude)), OK, "Claude Code "+cliversion.ClaudeTested+" at ", "")
	expect(t, find(t, checks, "codex credentials of team demo"), Warn, "no OPENAI_API_KEY", "codex login")

	got := find(t, checks, cliCheckName("demo", config.AgentCodex)).CLI
	wantCLI := &InstalledCLI{Kind: config.AgentCodex, Modes: []string{"plan"}, Program: "codex",
		Path: agent.LookIn("codex", w.get("PATH")), Version: cliversion.CodexTested, Tested: cliversion.CodexTested}
	if diff := cmp.Diff(wantCLI, got); diff != "" {
		t.Errorf("codex version check's cli (-want +got):\n%s", diff)
	}
}

// TestPolicies: the permissions check says, per group of modes, the
// policy, the kind (when the team runs more than one) and what it lets the
// agent do without asking.
func TestPolicies(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"default", "", "sandbox in every mode: everything, with the agent's prompts off, confined by Landlock: writes only to the worktree, " +
			"the git objects and refs, the agent's state and caches, /tmp; secrets and Legion's state hidden (the finisher runs as allowlist; Landlock ABI 7)"},
		{"allowlist", `agent.permissions = "allowlist"` + "\n", "allowlist in every mode: Legion's own commands, git, file edits in the worktree and agent.allow, anything else waits for a person"},
		{"ask", `agent.permissions = "ask"` + "\n", "ask in every mode: only legion issue, every other call waits for a person"},
		{"bypass but finish", `agent.permissions = "bypass"` + "\nagent.permissions_by_mode = { finish = \"ask\" }\n",
			"bypass in plan, implement, review, retro: everything, unconfined: any command with your rights, any file, the network; " +
				"ask in finish: only legion issue, every other call waits for a person"},
		{"gemini", `agent.permissions = "allowlist"` + "\n" + `agent.kind = "gemini"` + "\n", "allowlist in every mode: Legion's own commands, git, file edits in the worktree (agent.allow is not used), anything else waits for a person"},
		{"codex ask", `agent.kind = "codex"` + "\n" + `agent.permissions = "ask"` + "\n",
			"ask in every mode: what Codex's own workspace-write sandbox allows (commands that write only in the worktree and the repository's git directory, with the network) and Legion's own commands for its issue, anything else waits for a person (agent.allow is not used)"},
		{"custom", `agent.permissions = "allowlist"` + "\n" + `agent.kind = "custom"` + "\nagent.new = [\"true\"]\nagent.resume = [\"true\"]\n",
			"allowlist in every mode: Legion sets no policy for a custom agent: its program asks what it asks"},
		{"opencode review", `agent.permissions = "allowlist"` + "\n" + "agent.kind_by_mode = { review = \"opencode\" }\n",
			"allowlist in plan, implement, retro, finish (claude): Legion's own commands, git, file edits in the worktree and agent.allow, anything else waits for a person; " +
				"allowlist in review (opencode): Legion's own commands, git, file edits in the worktree and agent.allow, anything else waits for a person"},
	}
	old := sandboxStatus
	t.Cleanup(func() { sandboxStatus = old })
	sandboxStatus = func() confine.Status { return confine.Status{ABI: 7, Holds: true, Why: "Landlock ABI 7"} }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checkPolicy(parseTeam(t, tt.config))
			if c.Status != OK || c.Detail != tt.want {
				t.Errorf("checkPolicy = %s %q; want ok %q", c.Status, c.Detail, tt.want)
			}
		})
	}
	// The sandbox policy, where it holds and where it does not.
	for _, st := range []confine.Status{{ABI: 7, Holds: true, Why: "Landlock ABI 7"}, {ABI: 0, Why: "no Landlock"}} {
		sandboxStatus = func() confine.Status { return st }
		want := "everything, with the agent's prompts off, confined by Landlock: writes only to the worktree"
		if !st.Holds {
			want = "what allowlist allows, since the sandbox does not hold here: no Landlock"
		}
		for _, k := range []config.AgentKind{config.AgentClaude, config.AgentCodex, config.AgentGemini, config.AgentOpencode} {
			if got := unasked(config.PermissionsSandbox, k); !strings.HasPrefix(got, want) {
				t.Errorf("unasked(sandbox, %s) with %+v = %q; want it to start %q", k, st, got, want)
			}
		}
	}
}

// TestKindPrograms: every kind with a CLI of its own has its pin, and the
// program its default agent.new runs is that CLI's.
func TestKindPrograms(t *testing.T) {
	for _, k := range []config.AgentKind{config.AgentClaude, config.AgentCodex, config.AgentGemini, config.AgentOpencode} {
		cli, ok := cliversion.For(string(k))
		if !ok {
			t.Errorf("kind %s has no tested version in agent/cliversion", k)
			continue
		}
		prog := config.DefaultAgentProgram()
		if argv, _, ok := config.KindArgv(k); ok {
			prog = argv[0]
		}
		if cli.Program != prog {
			t.Errorf("cliversion.For(%s).Program = %q; the kind's default agent.new runs %q", k, cli.Program, prog)
		}
	}
}

// TestRealCLIVersions runs the version check against each real, pinned
// CLI (missing: skipped, or failed with CI=true) as a team's only kind:
// it reports the tested release, and the CLI, which writes into its home
// even for --version (FACTS G22, X25, O20), wrote nothing into the
// user's.
func TestRealCLIVersions(t *testing.T) {
	for _, cli := range cliversion.All() {
		t.Run(cli.Kind, func(t *testing.T) {
			k := config.AgentKind(cli.Kind)
			w := realCLIs(t, k)
			home := w.get("HOME")
			t.Setenv("HOME", home)
			team := parseTeam(t, fmt.Sprintf("agent.kind = %q\n", k))
			c, ok := checkCLI(t.Context(), Options{}.withDefaults(), team, kindUses(team)[0], w, versionCache{})
			if !ok {
				t.Fatalf("no version check for kind %s", k)
			}
			status := OK
			if os.Getenv(cli.TestEnv) != "" {
				status = c.Status // another build of the CLI, of any version
			}
			expect(t, c, status, " at "+agent.LookIn(cli.Program, w.get("PATH")), "")
			if c.CLI == nil || c.CLI.Version == "" || (status == OK && c.CLI.Version != cli.Tested) {
				t.Errorf("check's cli = %+v; want version %s", c.CLI, cli.Tested)
			}
			entries, err := os.ReadDir(home)
			if err != nil || len(entries) > 0 {
				t.Errorf("after the check the user's home %s holds %v (%v); want nothing", home, entries, err)
			}
		})
	}
}

// TestCLIVersionCheck: a release other than the tested one warns, saying
// which is installed and what to do; output that is not the CLI's, or a
// program that fails, warns that the version is unknown; a kind only
// agent.kind_by_mode names fails when the workers' PATH lacks its
// program. The programs here stand in for releases that are not
// installed: each prints what the real CLI's --version prints (testdata
// of agent/cliversion), with another version.
func TestCLIVersionCheck(t *testing.T) {
	tests := []struct {
		name   string
		config string
		kind   config.AgentKind
		script string // the program's body; "" for none in PATH
		status Status
		detail string
		fix    string
	}{
		{"claude newer", "", config.AgentClaude, `echo "2.1.332 (Claude Code)"`, Warn,
			"claude 2.1.332 installed (DIR/claude), Legion was tested with " + cliversion.ClaudeTested +
				": newer releases change hooks and dialogs; run the tests or pin it",
			"`LEGION_CLAUDE_CODE=DIR/claude make test`"},
		{"codex newer", `agent.kind = "codex"` + "\n", config.AgentCodex, `echo "codex-cli 0.171.0"`, Warn,
			"codex 0.171.0 installed (DIR/codex), Legion was tested with " + cliversion.CodexTested, "`npm install -g @openai/codex@" + cliversion.CodexTested + "`"},
		{"gemini older", `agent.kind = "gemini"` + "\n", config.AgentGemini, `echo 0.50.1`, Warn,
			"gemini 0.50.1 installed (DIR/gemini), Legion was tested with " + cliversion.GeminiTested + ": older releases", "install Gemini CLI " + cliversion.GeminiTested},
		{"opencode prerelease", `agent.kind = "opencode"` + "\n", config.AgentOpencode, `echo 1.18.33-beta.1`, Warn,
			"opencode 1.18.33-beta.1 installed (DIR/opencode), Legion was tested with " + cliversion.OpencodeTested + ": older releases", "install opencode"},
		{"not the CLI", "", config.AgentClaude, `echo "opencode 1.18.33"`, Warn,
			`cannot tell the version of DIR/claude: claude --version printed "opencode 1.18.33"; want "VERSION (Claude Code)"`, "make sure agent.new starts Claude Code"},
		{"fails", "", config.AgentClaude, `echo "no such option" >&2; exit 3`, Warn,
			"cannot tell the version of DIR/claude: `DIR/claude --version`: exit status 3: no such option", "must print \"" + cliversion.Claude.Want(cliversion.ClaudeTested) + "\""},
		{"kind_by_mode missing", "agent.kind_by_mode = { plan = \"codex\", review = \"codex\" }\n", config.AgentCodex, "", Fail,
			"codex (agent.kind_by_mode of plan, review) not found in the user manager's PATH (DIR), which workers get", "install Codex " + cliversion.CodexTested},
		{"kind_by_mode newer", "agent.kind_by_mode = { review = \"codex\" }\n", config.AgentCodex, `echo "codex-cli 0.171.0"`, Warn,
			"codex 0.171.0 installed (DIR/codex)", "a mode that agent.kind_by_mode gives codex runs codex from there"},
		{"own missing", "", config.AgentClaude, "", Fail, "claude (agent.new) not found", `see the check "agent of team demo"`},
		{"placeholder", `agent.new = ["{workspace}/bin/claude", "{prompt}"]` + "\n", config.AgentClaude, "", Warn,
			"is filled in per session (a placeholder)", cliversion.Claude.Want(cliversion.ClaudeTested)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cli, _ := cliversion.For(string(tt.kind))
			if tt.script != "" {
				if err := os.WriteFile(filepath.Join(dir, cli.Program), []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			team := parseTeam(t, tt.config)
			var use kindUse
			for _, u := range kindUses(team) {
				if u.kind == tt.kind {
					use = u
				}
			}
			w := workerEnv{env: []string{"PATH=" + dir, "HOME=" + t.TempDir()}}
			c, ok := checkCLI(t.Context(), Options{}.withDefaults(), team, use, w, versionCache{})
			if !ok {
				t.Fatalf("no version check for kind %s", tt.kind)
			}
			expect(t, c, tt.status, strings.ReplaceAll(tt.detail, "DIR", dir), strings.ReplaceAll(tt.fix, "DIR", dir))
		})
	}
}

// TestCLIVersionManagerPath: under a real user manager, the version check
// finds each kind's program where workers find it, in the manager's PATH
// (set with set-environment), not in this shell's, for the team's own
// kind and for a kind that only agent.kind_by_mode names.
func TestCLIVersionManagerPath(t *testing.T) {
	m := sdtest.Start(t)
	s := newSandbox(t)
	s.useManager(t, m)
	w := realCLIs(t, config.AgentClaude, config.AgentCodex)
	dir := filepath.Dir(agent.LookIn("codex", w.get("PATH")))
	if _, err := m.Systemctl(t, "set-environment", "PATH="+dir+":/usr/local/bin:/usr/bin:/bin"); err != nil {
		t.Fatal(err)
	}
	s.writeConfig(t, "agent.kind_by_mode = { plan = \"codex\" }\n")
	checks := Run(t.Context(), s.opts)
	for _, k := range []config.AgentKind{config.AgentClaude, config.AgentCodex} {
		cli, _ := cliversion.For(string(k))
		c := find(t, checks, cliCheckName("demo", k))
		expect(t, c, OK, cli.Name+" "+cli.Tested+" at "+filepath.Join(dir, cli.Program)+", the release", "")
		if strings.Contains(c.Detail, "this shell") {
			t.Errorf("check %q found the program in this shell's PATH: %s", c.Name, c.Detail)
		}
	}
	if strings.Contains(os.Getenv("PATH"), dir) {
		t.Fatalf("this shell's PATH %s has %s: the test proves nothing", os.Getenv("PATH"), dir)
	}
}

// TestKindCheckWithoutManager: every kind's own check (codex, gemini,
// opencode, through the registry) warns and points at the manager's check
// when the user manager's environment, which it reads, cannot be read.
func TestKindCheckWithoutManager(t *testing.T) {
	var checked []string
	for _, k := range kinds.All() {
		kind := config.AgentKind(k.Name())
		c, ok := kindCheck(config.Team{Name: "demo", Agent: config.Agent{Kind: kind}}, kind, workerEnv{err: errors.New("no bus")})
		if !ok {
			continue
		}
		checked = append(checked, k.Name())
		if c.Status != Warn || !strings.Contains(c.Fix, CheckManager) || c.Name != k.(agent.Checker).CheckName()+" of team demo" {
			t.Errorf("kind %s without the manager's environment: %+v; want a warning pointing at %q", kind, c, CheckManager)
		}
	}
	if want := []string{"codex", "gemini", "opencode"}; !slices.Equal(checked, want) {
		t.Errorf("kinds with a check of their own: %q; want %q", checked, want)
	}
}
