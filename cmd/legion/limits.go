package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
)

func newLimitsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "The agent kinds waiting at their model API's usage limit",
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show TEAM",
		Short: "Show the agent kinds waiting at their API's usage limit",
		Long: `Show, for each agent kind of TEAM whose agents stopped at the model API's
rate or usage limit, until when its new dispatches wait, whether that is
the reset time an agent gave or Legion's backoff, and each limit seen in
this episode. When the pause ends, the controller prompts the paused
conversations to go on by itself, oldest first, two a tick.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTeam(g, args[0])
			if err != nil {
				return err
			}
			pauses, err := (&controller.Limits{Path: team.LimitsPath(t.StateDir)}).Pauses()
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), pauses)
			}
			return printPauses(cmd.OutOrStdout(), pauses, time.Now())
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(show, &cobra.Command{
		Use:   "resume TEAM [KIND...]",
		Short: "End the pauses of a team's agent kinds now",
		Long: `End the pauses at the model API's limit of TEAM's agent kinds (all of them,
or the KINDs named: claude, codex, gemini, opencode), for when a person
knows the limit lifted early (a plan upgraded, a quota raised). The
controller is woken and prompts the paused conversations to go on, two a
tick, oldest first; if the limit is still there, they stop at it again and
the backoff goes on where it was.`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTeam(g, args[0])
			if err != nil {
				return err
			}
			ended, err := (&controller.Limits{Path: team.LimitsPath(t.StateDir)}).Resume(time.Now(), args[1:]...)
			if err != nil {
				return err
			}
			if len(ended) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no agent kind of team %s is paused\n", t.Name)
				return nil
			}
			if err := team.Wake(t.StateDir, "legion limits resume"); err != nil {
				return err
			}
			for _, k := range ended {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: resumed; the controller prompts its paused agents to go on\n", k)
			}
			return nil
		},
	})
	return cmd
}

// printPauses writes the pauses as a table.
func printPauses(w io.Writer, pauses map[string]*controller.Pause, now time.Time) error {
	if len(pauses) == 0 {
		_, err := fmt.Fprintln(w, "no agent kind waits at its API's limit")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tPAUSED UNTIL\tFROM\tLIMITS SEEN\tWAITED")
	for _, k := range slices.Sorted(maps.Keys(pauses)) {
		p := pauses[k]
		until := "- (not paused)"
		if p.Paused(now) {
			until = p.Until.Local().Format(time.DateTime)
		}
		from := "backoff"
		if p.ResetKnown {
			from = "reset time"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", k, until, from, len(p.Hits), p.Waited.Round(time.Second))
	}
	return tw.Flush()
}
