package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// loadTeam loads the config and returns the named team.
func loadTeam(g *globals, name string) (*config.Config, config.Team, error) {
	cfg, err := config.Load(g.configPath)
	if err != nil {
		return nil, config.Team{}, err
	}
	t, ok := cfg.Team(name)
	if !ok {
		return nil, config.Team{}, fmt.Errorf("team %q is not in %s (see `legion team list`)", name, cfg.Path)
	}
	return cfg, t, nil
}

// openTeam loads the config and assembles the named team's parts.
func openTeam(g *globals, name string) (*team.Team, error) {
	t, _, err := openTeamConfig(g, name)
	return t, err
}

// openTeamConfig is openTeam that also returns the config the team came
// from (its [worker] settings go into every launch).
func openTeamConfig(g *globals, name string) (*team.Team, *config.Config, error) {
	cfg, t, err := loadTeam(g, name)
	if err != nil {
		return nil, nil, err
	}
	state, err := config.StateDir()
	if err != nil {
		return nil, nil, err
	}
	tm, err := team.Open(t, cfg.Path, state)
	if err != nil {
		return nil, nil, err
	}
	if tm.Legion, err = os.Executable(); err != nil {
		return nil, nil, fmt.Errorf("find the legion executable, which agents' hooks run: %w", err)
	}
	return tm, cfg, nil
}

func newIssueCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "issue",
		Short: "Manage a team's issues (agents label them through these commands)",
		Long: `Manage a team's issues. show, move, label, unlabel and comment work on any
tracker (the embedded local one, Linear, GitHub), so agents use the same commands
whatever the team's tracker is; add and list manage the local tracker. On
Linear a comment is posted as the API key's user, marked as Legion's. With
review = "github", pr pushes the issue's branch and opens its pull
request, and the review outcomes worker-approved and
worker-changes-requested are labels on that pull request.`,
	}
	var asJSON bool
	var author string
	withTracker := func(use, short string, args cobra.PositionalArgs, f func(cmd *cobra.Command, t *team.Team, args []string) error) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: args,
			RunE: func(cmd *cobra.Command, args []string) error {
				if os.Getenv(proto.EnvHookSocket) != "" && os.Getenv("LEGION_ISSUE") != "" && len(args) >= 2 {
					// An agent of an issue's session: its worker runs the
					// command (a sandboxed agent cannot read the tracker);
					// an older worker, or one with no legion program to
					// run, leaves it to this process.
					argv := []string{cmd.Name()}
					if asJSON {
						argv = append(argv, "--json")
					}
					if cmd.Flags().Changed("author") {
						argv = append(argv, "--author", author)
					}
					err := relayIssue(cmd, append(append(argv, "--"), args...))
					if !errors.Is(err, proto.ErrNotRelayed) {
						return err
					}
				}
				t, err := openTeam(g, args[0])
				if err != nil {
					return err
				}
				return f(cmd, t, args[1:])
			},
		}
	}
	withStore := func(use, short string, args cobra.PositionalArgs, f func(cmd *cobra.Command, s *local.Store, args []string) error) *cobra.Command {
		return withTracker(use, short, args, func(cmd *cobra.Command, t *team.Team, args []string) error {
			s, err := t.Local()
			if err != nil {
				return err
			}
			return f(cmd, s, args)
		})
	}
	add := withStore("add TEAM TITLE", "Add an issue in Todo and print its identifier", usageArgs(cobra.ExactArgs(2)),
		func(cmd *cobra.Command, s *local.Store, args []string) error {
			is, err := s.Add(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), is)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), is.ID)
			return err
		})
	list := withStore("list TEAM", "List a team's issues", usageArgs(cobra.ExactArgs(1)),
		func(cmd *cobra.Command, s *local.Store, _ []string) error {
			issues, err := s.Issues(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if issues == nil {
					issues = []controller.TrackedIssue{}
				}
				return writeJSON(cmd.OutOrStdout(), issues)
			}
			return printIssues(cmd.OutOrStdout(), issues)
		})
	show := withTracker("show TEAM ISSUE", "Show one issue with its labels and comments", usageArgs(cobra.ExactArgs(2)),
		func(cmd *cobra.Command, t *team.Team, args []string) error {
			is, err := findIssue(cmd.Context(), t, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), is)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s  %s\nstatus: %s\nlabels: %s\n", is.ID, is.Title, is.Status, strings.Join(is.Labels, ", "))
			for _, c := range is.Comments {
				fmt.Fprintf(w, "\n%s (%s):\n%s\n", c.Author, c.Time.Format("2006-01-02 15:04"), c.Text)
			}
			return nil
		})
	move := withTracker("move TEAM ISSUE STATUS", `Move an issue to a status (Todo, "In Progress", "Needs Review", Retro, Done)`, usageArgs(cobra.ExactArgs(3)),
		func(cmd *cobra.Command, t *team.Team, args []string) error {
			return t.Tracker.Move(cmd.Context(), args[0], controller.Status(args[1]))
		})
	label := withTracker("label TEAM ISSUE LABEL", "Add a label to an issue (no-op when present)", usageArgs(cobra.ExactArgs(3)),
		func(cmd *cobra.Command, t *team.Team, args []string) error {
			return t.Label(cmd.Context(), args[0], args[1])
		})
	unlabel := withTracker("unlabel TEAM ISSUE LABEL", "Remove a label from an issue (no-op when absent)", usageArgs(cobra.ExactArgs(3)),
		func(cmd *cobra.Command, t *team.Team, args []string) error {
			return t.Unlabel(cmd.Context(), args[0], args[1])
		})
	comment := withTracker("comment TEAM ISSUE TEXT", "Comment on an issue", usageArgs(cobra.ExactArgs(3)),
		func(cmd *cobra.Command, t *team.Team, args []string) error {
			if s, ok := t.Tracker.(*local.Store); ok {
				return s.CommentAs(cmd.Context(), args[0], author, args[1])
			}
			if cmd.Flags().Changed("author") {
				return usageError{fmt.Errorf("comment --author: team %q uses the %s tracker, which records the API key's user as the author", t.Name, t.Team.Tracker)}
			}
			return t.Tracker.Comment(cmd.Context(), args[0], args[1])
		})
	comment.Flags().StringVar(&author, "author", defaultAuthor(), "who the comment is from (local tracker)")
	pr := withTracker("pr TEAM ISSUE TITLE [BODY]", "Push the issue's branch to GitHub and open its pull request (review = \"github\")", usageArgs(cobra.RangeArgs(3, 4)),
		func(cmd *cobra.Command, t *team.Team, args []string) error {
			body := ""
			if len(args) == 3 {
				body = args[2]
			}
			pr, err := t.Publish(cmd.Context(), args[0], args[1], body)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), pr)
			}
			verb := "opened"
			if !pr.Created {
				verb = "pushed; already open:"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s pull request #%d %s\n", verb, pr.Number, pr.URL)
			return err
		})
	pr.Long = `Push the issue's branch (legion/ISSUE, committed and clean) to the team's
GitHub repository and open its pull request into the default branch, or
print the one that is open already. Legion pushes over HTTPS with the
team's GitHub token ([teams.NAME.github]), so an agent needs neither gh
nor a login of its own; under the sandbox policy the agent's worker runs
it, outside the sandbox. Needs review = "github".`
	for _, c := range []*cobra.Command{add, list, show, pr} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(add, list, show, move, label, unlabel, comment, pr)
	return cmd
}

// findIssue returns issue id of t's tracker: the local tracker reads it
// directly, any other finds it among the open issues it lists.
func findIssue(ctx context.Context, t *team.Team, id string) (controller.TrackedIssue, error) {
	switch tr := t.Tracker.(type) {
	case *local.Store:
		return tr.Issue(ctx, id)
	case *github.Tracker:
		is, _, err := tr.Issue(ctx, id)
		return is, err
	}
	issues, err := t.Tracker.Issues(ctx)
	if err != nil {
		return controller.TrackedIssue{}, err
	}
	for _, is := range issues {
		if strings.EqualFold(is.ID, id) {
			return is, nil
		}
	}
	return controller.TrackedIssue{}, fmt.Errorf("issue %s of team %q: %w (the %s tracker lists open issues only)", id, t.Name, controller.ErrIssueNotFound, t.Team.Tracker)
}

func defaultAuthor() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "user"
}

func printIssues(w io.Writer, issues []controller.TrackedIssue) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ISSUE\tSTATUS\tLABELS\tTITLE")
	for _, is := range issues {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", is.ID, is.Status, strings.Join(is.Labels, ","), is.Title)
	}
	return tw.Flush()
}

// usageArgs marks argument-count errors as usage errors (exit code 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{errors.New(cmd.CommandPath() + ": " + err.Error())}
		}
		return nil
	}
}

// relayIssue has the session's worker run `legion issue ARGV...` and
// prints what it printed; a failure exits with the command's status.
func relayIssue(cmd *cobra.Command, argv []string) error {
	res, err := proto.RelayIssue(cmd.Context(), argv, os.Getenv)
	if err != nil {
		return err
	}
	io.WriteString(cmd.OutOrStdout(), res.Stdout)
	io.WriteString(cmd.ErrOrStderr(), res.Stderr)
	if res.Code != 0 {
		return relayedExit{res.Code}
	}
	return nil
}

// relayedExit is the exit status of a command another process ran and
// whose error it printed already.
type relayedExit struct{ code int }

func (e relayedExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }
