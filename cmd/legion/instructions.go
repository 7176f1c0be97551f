package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/instructions"
	"github.com/legion-dev/legion/controller/workspace"
)

func newInstructionsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "instructions",
		Short: "What Legion tells a team's agents",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "show TEAM MODE [ISSUE]",
		Short: "Print the instructions an agent of TEAM gets in MODE",
		Long: `Show prints what Legion tells the agent of ISSUE in MODE (plan, implement,
review, retro, finish, or controller for the controller agent): the phase's
instructions rendered for the team and the issue, exactly as the agent gets
them as its prompt. Without ISSUE it renders them for ISSUE-1. They come
from the team's agent.instructions_dir where it has the phase's file, else
from Legion's built-in text: copy that into the directory to change it. A
template that lost a command its phase must run is refused, naming it.
Nothing is created: no worktree, no session.`,
		Args: usageArgs(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTeam(g, args[0])
			if err != nil {
				return err
			}
			mode, issue := args[1], "ISSUE-1"
			if len(args) == 3 {
				issue = args[2]
			}
			kind, err := kinds.For(t.Agent.ForMode(mode))
			if err != nil {
				return fmt.Errorf("team %s: %w", t.Name, err)
			}
			var text string
			if mode == instructions.ModeController {
				text, err = t.ControllerInstructions(kind.Name(), nil)
			} else {
				wt := workspace.Worktree{Issue: issue, Path: t.Worktrees.Path(issue), Branch: workspace.Branch(issue)}
				text, err = t.Instructions(cmd.Context(), issue, controller.Mode(mode), wt, kind.Name(), agent.Session{})
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	})
	return cmd
}
