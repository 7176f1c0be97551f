package main

import (
	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/agent/kinds"
)

// newAgentCmd is `legion agent prepare FILE`, a prepare command of a
// cluster session's pod (agent.PodPrepare): hidden, since the controller
// writes its only argument.
func newAgentCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Prepare an agent in its pod (run by the pod, not by people)",
		Hidden: true,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "prepare FILE",
		Short: "Make the agent's prepared files (settings, hooks, dialog answers) in this pod, as the controller planned them in FILE",
		Long: `Run the agent kind's Prepare in a Kubernetes pod, before its worker starts
the agent: FILE (agent-prepare.json in the session's spec Secret) holds the
session and the launch the controller planned with the pod's paths. The
kind's files (Claude Code's settings with its hooks and permission rules, the
dialog answers in ~/.claude.json) are written on the issue's volume as this
pod's user. Fails, naming FILE, when FILE is not such a plan or when the
launch the pod would prepare is not the controller's.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return kinds.PreparePod(cmd.Context(), args[0])
		},
	})
	return cmd
}
