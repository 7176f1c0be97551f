package main

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
)

// teamJSON is a team as `legion team add|list --json` print it.
type teamJSON struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	ShortID    string `json:"short_id"`
	Workspace  string `json:"workspace"`
	Tracker    string `json:"tracker,omitempty"`
	Review     string `json:"review,omitempty"`
	Controller string `json:"controller,omitempty"`
	Agent      string `json:"agent,omitempty"` // agent.new's program
}

func newTeamCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "team",
		Short: "Add and list the teams of legion.toml",
		Long: `A team is one [teams.<name>] table of legion.toml: a workspace (git repository),
a stable id from which every session id derives, and its tracker, agent and
limits. See legion.toml(5).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTeamAddCmd(g), newTeamListCmd(g))
	return cmd
}

func newTeamAddCmd(g *globals) *cobra.Command {
	var (
		workspace, kind, gh string
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME --workspace DIR",
		Short: "Add a team with a fresh id to legion.toml",
		Long: `Add a team: append a [teams.<NAME>] table with a fresh random id and the
absolute path of DIR to legion.toml, creating the file if needed. The rest of
the file is left as it is. NAME may hold spaces, '/' and any Unicode, but no
control characters.

--kind picks the team's agents (agent.kind): claude (Claude Code, the
default), codex, gemini, opencode or custom (then edit agent.new yourself).
When this shell's PATH finds the kind's program (claude, codex, gemini or
opencode), its absolute path goes into the team's agent.new and
agent.resume: workers run with the user manager's PATH (systemctl --user
show-environment), which often lacks the directory an installer uses
(~/.local/bin). Otherwise they stay the bare name, and legion doctor says
how workers can find it.

--github owner/name makes the team's tracker that repository's issues
(tracker = "github"): Legion takes the open issues labelled legion, and the
pull request of each issue's branch is what gets reviewed and merged. Put a
token in GITHUB_TOKEN of the user manager or in github.credentials_file.`,
		Example: `  legion team add demo --workspace ~/src/demo
  legion team add api --workspace ~/src/api --kind codex
  legion team add web --workspace ~/src/web --github acme/web`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("team add: expected one NAME, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if workspace == "" {
				return usageError{errors.New("team add: --workspace DIR is required: the team's git repository")}
			}
			prog := config.AgentProgram(config.AgentKind(kind))
			agent := ""
			if prog != "" {
				if p, err := exec.LookPath(prog); err == nil && filepath.IsAbs(p) {
					agent = p
				}
			}
			t, err := config.AddTeamWith(g.configPath, config.NewTeam{Name: args[0], Workspace: workspace, Kind: config.AgentKind(kind), Agent: agent, GitHub: gh})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if agent == "" && prog != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s is not in this shell's PATH: the team's agent stays %q, which workers look up in the user manager's PATH; once it is installed, `legion doctor` checks that workers find it\n", prog, prog)
			} else if !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "agent: %s (found in this shell's PATH; workers do not get that PATH, so agent.new and agent.resume name it by its full path)\n", agent)
			}
			if asJSON {
				return writeJSON(out, teamJSON{Name: t.Name, ID: t.ID.String(), ShortID: t.ShortID(), Workspace: t.Workspace, Agent: t.Agent.New[0]})
			}
			_, err = fmt.Fprintf(out, "added team %q with id %s (short id %s) to %s\n", t.Name, t.ID, t.ShortID(), g.configPath)
			return err
		},
	}
	cmd.Flags().StringVar(&workspace, "workspace", "", "the team's git repository (required)")
	cmd.Flags().StringVar(&kind, "kind", "claude", "the team's agents: claude, codex, gemini, opencode or custom (agent.kind)")
	cmd.Flags().StringVar(&gh, "github", "", `the team's issues are those of this GitHub repository ("owner/name") that carry the label legion (tracker = "github")`)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"name","id","short_id","workspace","agent"} as JSON`)
	return cmd
}

func newTeamListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the teams of legion.toml",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadOrEmpty(g.configPath)
			if err != nil {
				return err
			}
			if len(cfg.Teams) == 0 && !asJSON {
				_, err := fmt.Fprintf(cmd.ErrOrStderr(), "no teams in %s; add one with `legion team add NAME --workspace DIR`\n", cfg.Path)
				return err
			}
			return writeTeams(cmd.OutOrStdout(), cfg.Teams, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the teams as a JSON array")
	return cmd
}

// writeTeams prints teams as a table or, with asJSON, a JSON array.
func writeTeams(w io.Writer, teams []config.Team, asJSON bool) error {
	if asJSON {
		list := make([]teamJSON, 0, len(teams))
		for _, t := range teams {
			list = append(list, teamJSON{
				Name: t.Name, ID: t.ID.String(), ShortID: t.ShortID(), Workspace: t.Workspace,
				Tracker: string(t.Tracker), Review: string(t.Review), Controller: string(t.Controller),
			})
		}
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHORT ID\tTRACKER\tREVIEW\tCONTROLLER\tWORKSPACE")
	for _, t := range teams {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.ShortID(), t.Tracker, t.Review, t.Controller, t.Workspace)
	}
	return tw.Flush()
}
