package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/internal/journal"
)

func newStateCmd(g *globals) *cobra.Command {
	var asJSON, apply bool
	cmd := &cobra.Command{
		Use:   "state TEAM",
		Short: "Show each issue's state and the controller's suggested action",
		Long: `Collect the team's state in one pass (tracker, review outcomes, live sessions
from the helper, worktrees) and print, per issue, its status, labels, live
worker, blocked question, worktree and the suggested action with its reason.
With --apply, carry the suggestions out once, as the auto controller does
each tick.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			t, cfg, err := openTeamConfig(g, args[0])
			if err != nil {
				return err
			}
			src := t.Sources(service.NewSessionSource(t.Name))
			if apply {
				log := journal.NewTextLogger(os.Stderr, nil)
				r := controller.Tick(ctx, src, service.NewDispatcher(t, cfg.Worker), log)
				if r.Err != nil {
					return r.Err
				}
				if r.Failed > 0 {
					return fmt.Errorf("state --apply: %d of %d actions failed (see above)", r.Failed, r.Failed+r.Applied)
				}
			}
			st, _, err := controller.Collect(ctx, src)
			if err != nil {
				return err
			}
			rep := controller.Suggest(st)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return printReport(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&apply, "apply", false, "apply the suggested actions once, then print the state")
	return cmd
}

func printReport(w io.Writer, rep controller.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ISSUE\tSTATUS\tLABELS\tWORKER\tSUGGESTED\tREASON")
	for _, is := range rep.Issues {
		worker := "-"
		if is.Worker != nil {
			worker = string(is.Worker.Mode)
			switch {
			case is.Worker.Agent != nil:
				worker += " (" + string(is.Worker.Agent.State) + ")"
			case is.Worker.Blocked:
				worker += " (asks)"
			}
		} else if len(is.Failed) > 0 {
			var modes []string
			for _, f := range is.Failed {
				modes = append(modes, string(f.Mode))
			}
			worker = strings.Join(modes, ",") + " (failed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", is.ID, is.Status, strings.Join(is.Labels, ","), worker, is.Action, is.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, is := range rep.Issues {
		if is.Worker != nil && is.Worker.Blocked {
			fmt.Fprintf(w, "\n%s asks: %s\n", is.ID, is.Worker.Question)
		}
		if is.Worktree != nil && is.Worktree.Problem != "" {
			fmt.Fprintf(w, "\n%s\n", is.Worktree.Problem)
		}
		if is.Worktree != nil && len(is.Worktree.Conflicts) > 0 {
			fmt.Fprintf(w, "\n%s would conflict merging %s: %s\n", is.ID, is.Worktree.Branch, strings.Join(is.Worktree.Conflicts, ", "))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Pauses)) {
		if p := rep.Pauses[k]; p.Paused(time.Now()) {
			fmt.Fprintf(w, "\n%s paused until %s at its API's usage limit (%d seen; `legion limits resume` ends it)\n", k, p.Until.Local().Format(time.DateTime), len(p.Hits))
		}
	}
	if rep.LimitsProblem != "" {
		fmt.Fprintf(w, "\n%s\n", rep.LimitsProblem)
	}
	var waiting []string
	for _, is := range rep.Issues {
		if is.Decision.Room != nil {
			waiting = append(waiting, is.ID)
		}
	}
	if len(waiting) > 0 {
		fmt.Fprintf(w, "\nwaiting for room (not stalled; dispatched once there is room): %s\n", strings.Join(waiting, ", "))
	}
	if b := rep.Budget; b != nil {
		fmt.Fprintf(w, "\nBudget: today %s of %s; per issue %s\n", b.Today, limits(b.DayTokens, b.DayUSD), limits(b.IssueTokens, b.IssueUSD))
		for _, is := range rep.Issues {
			switch {
			case is.Spend != nil && (is.Spend.Tokens > 0 || is.Spend.USD > 0):
				fmt.Fprintf(w, "  %s: %s\n", is.ID, is.Spend)
			case is.SpendError != "":
				fmt.Fprintf(w, "  %s: spend unknown: %s\n", is.ID, is.SpendError)
			}
		}
		if b.Problem != "" {
			fmt.Fprintf(w, "  %s\n", b.Problem)
		}
	}
	return nil
}

// limits says a budget's limits: "2,000,000 tokens or $25.00", "no limit".
func limits(tokens int64, usd float64) string {
	var parts []string
	if tokens > 0 {
		parts = append(parts, controller.FormatTokens(tokens))
	}
	if usd > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", usd))
	}
	if len(parts) == 0 {
		return "no limit"
	}
	return strings.Join(parts, " or ")
}
