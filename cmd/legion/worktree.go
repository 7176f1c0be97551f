package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/controller/workspace"
)

func newWorktreeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worktree",
		Short: "Inspect and finish the per-issue git worktrees of a team",
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list TEAM",
		Short: "List the team's issue worktrees with port offsets and would-be merge conflicts",
		Long: `List the team's issue worktrees: branch, port offset, commits ahead of the
default branch, uncommitted changes and the files a merge would conflict in
(git merge-tree). A directory under the team's worktree directory that is not
a usable worktree is listed as broken, followed by what is wrong with it and
how to mend it; the controller starts no worker in it.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTeam(g, args[0])
			if err != nil {
				return err
			}
			wts, err := t.Worktrees.List(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), wts)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ISSUE\tBRANCH\tPORT OFFSET\tAHEAD\tDIRTY\tCONFLICTS\tPATH")
			for _, wt := range wts {
				if wt.Problem != "" {
					fmt.Fprintf(tw, "%s\t%s\t%d\t-\t-\t-\t%s (broken)\n", wt.Issue, wt.Branch, wt.PortOffset, wt.Path)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%t\t%s\t%s\n", wt.Issue, wt.Branch, wt.PortOffset, wt.Ahead, wt.Dirty, strings.Join(wt.Conflicts, ","), wt.Path)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, wt := range wts {
				if wt.Problem != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", wt.Problem)
				}
			}
			return nil
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var keepOpen bool
	finish := &cobra.Command{
		Use:   "finish TEAM ISSUE",
		Short: "Merge the issue's branch into the default branch, remove its worktree and branch, close the issue",
		Long: `Merge legion/ISSUE into the default branch of the team's workspace (which
must have it checked out) or, with review = "github", merge the issue's pull
request; then remove the issue's worktree and branch, and move the issue to
Done and remove its labels worker-done and worker-finishing (unless
--keep-open). One command, because the finisher
agent runs inside the worktree it removes. On a conflict the merge is
aborted, nothing is removed or moved, and the conflicting files are listed;
exit status 1.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTeam(g, args[0])
			if err != nil {
				return err
			}
			if err := t.Finish(cmd.Context(), args[1], keepOpen); err != nil {
				return err
			}
			msg := "merged legion/%s, removed its worktree and branch, moved it to Done\n"
			if keepOpen {
				msg = "merged legion/%s, removed its worktree and branch\n"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), msg, args[1])
			return err
		},
	}
	finish.Flags().BoolVar(&keepOpen, "keep-open", false, "do not move the issue to Done")
	clone := &cobra.Command{
		Use:   "clone URL DIR",
		Short: "Clone a team's repository for an issue's pod, or refresh that clone",
		Long: `Clone the repository URL into DIR, marked as Legion's own (git config
legion.clone), or, when DIR is that clone already, fetch origin and set its
default branch to origin's. A pod of a team on a cluster runs it before its
agent starts (then "legion worktree ensure"): the issue's volume holds the
clone, and the finisher merges into it and pushes to URL. DIR with files
but no repository, another repository or a clone of another URL is refused
and left as it is.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return workspace.Clone(cmd.Context(), args[0], args[1])
		},
	}
	ensure := &cobra.Command{
		Use:   "ensure TEAM ISSUE",
		Short: "Make the issue's worktree and branch if missing, and print its path",
		Long: `Make the issue's worktree (branch legion/ISSUE from the default branch) if
it is missing, as the controller does before it starts a worker, and print
its path. A pod of a team on a cluster runs it before its agent starts.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTeam(g, args[0])
			if err != nil {
				return err
			}
			wt, err := t.Worktrees.Ensure(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), wt.Path)
			return err
		},
	}
	cmd.AddCommand(list, finish, clone, ensure)
	return cmd
}
