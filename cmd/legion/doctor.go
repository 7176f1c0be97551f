package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/cli/doctor"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check that everything Legion needs is there and working",
		Long: `Doctor checks the config, the systemd user manager, lingering, the D-Bus
session bus, which of the directives of Legion's units the user manager can
apply (it tries each group in a transient unit, as legion install does, and
names what is left out with the fix), whether the kernel enforces memory and
CPU limits for it, the installed unit files (are they what legion install
would write now, on this host?), the journal, the helper's socket, the legion-pty-worker program (the one
beside the legion that the installed legion.service runs), git, tmux,
whether the dashboard listens only on this machine (web.address: a warning
otherwise), and for each team:

  - its agent program (an absolute path, or a name looked up in the PATH of
    the user manager, which workers get, not in this shell's: see
    systemctl --user show-environment);
  - which permission policy each mode runs (agent.permissions,
    agent.permissions_by_mode) with which kind (agent.kind,
    agent.kind_by_mode), and what it lets the agent do without asking:
    allowlist: Legion's own commands, git, file edits in the worktree and
    agent.allow; ask: only legion issue; bypass: everything, unconfined;
  - for every kind it runs in some mode, the version of that kind's CLI
    (the program agent.new names, found as workers find it, run with
    --version) against the release Legion was tested with (Claude Code
    ` + cliversion.ClaudeTested + `, Codex ` + cliversion.CodexTested + `, Gemini CLI ` + cliversion.GeminiTested + `, opencode ` + cliversion.OpencodeTested + `):
    another release is a warning, since newer ones change hooks and
    dialogs;
  - for Codex, its credentials; for the Gemini CLI, its program, node and
    GEMINI_API_KEY or a Google sign-in; for opencode, its provider's key
    (present in the user manager's environment, never read): each kind's
    own check, found through the kinds' registry;
  - whether one of its agents fits: the size the controller expects one
    to take (its agents' learnt peak, else agent.memory_max, else 1 GiB)
    against the machine's memory and the team's slice (memory_max), a
    failure when it never could, a warning when it waits for room now;
  - when it configures notifications ([teams.<name>.notify]), each
    channel set up as its controller sets it up: a webhook's signing
    secret and an ntfy token from the user manager's environment or a
    0600 file, and for notify.desktop a session bus (nothing is sent:
    legion notify test does);
  - when it uses GitHub (tracker = "github" or review = "github"), what
    its token may do on github.repo: the token is read as the controller
    reads it (from the user manager's environment, else
    github.credentials_file), GitHub is asked in one query (the token's
    user, that user's permission on the repository, a classic token's
    scopes, whether issues are on, the rate limit left), and a missing
    write permission or scope (repo, or public_repo for a public
    repository), issues turned off for a team on GitHub's issues, a
    repository not found or not visible to the token, or a rejected token
    fails, with how to get what is missing. The token is never printed.

It prints each check as ok, warn or FAIL with, for a problem, what to do.

It changes nothing. Connecting to the helper's socket starts legion.service
through socket activation, as any client does; each agent CLI's --version
runs with a temporary HOME, removed afterwards; each GitHub team's query
costs its token one point of its rate limit.

Exit status: 0 when no check failed (warnings allowed), 1 when one did.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDoctor(cmd.Context(), g, asJSON, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"ok": BOOL, "checks": [{"name", "status", "detail", "fix", "team", "policies", "cli"}...]}: a team's permissions check has "policies": [{"policy", "kind", "modes", "unasked"}...], a version check "cli": {"kind", "modes", "program", "path", "version", "tested"}`)
	return cmd
}

func runDoctor(ctx context.Context, g *globals, asJSON bool, out io.Writer) error {
	bin, err := legionBinary("")
	if err != nil {
		return err
	}
	checks := doctor.Run(ctx, doctor.Options{
		ConfigPath: g.configPath,
		UnitDir:    defaultUnitDir(),
		Bin:        bin,
		TeamUnits:  teamUnits,
		Version:    version,
	})
	failed := doctor.Failed(checks)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			OK     bool           `json:"ok"`
			Checks []doctor.Check `json:"checks"`
		}{failed == 0, checks}); err != nil {
			return fmt.Errorf("doctor: print: %w", err)
		}
	} else if err := printChecks(out, checks); err != nil {
		return fmt.Errorf("doctor: print: %w", err)
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed", failed, len(checks))
	}
	return nil
}

// printChecks writes one line per check, and an indented fix line under
// each problem.
func printChecks(w io.Writer, checks []doctor.Check) error {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	var b strings.Builder
	for _, c := range checks {
		status := string(c.Status)
		if c.Status == doctor.Fail {
			status = "FAIL"
		}
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", status, width, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(&b, "%-4s  %-*s  fix: %s\n", "", width, "", c.Fix)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
