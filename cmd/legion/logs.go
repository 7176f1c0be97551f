package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/journal"
	"github.com/legion-dev/legion/units/unitname"
)

func newLogsCmd(g *globals) *cobra.Command {
	var (
		follow bool
		asJSON bool
		lines  int
	)
	cmd := &cobra.Command{
		Use:   "logs [-f] [-n N] [--json] TEAM [ISSUE]",
		Short: "Print what a team's controller, helper and workers logged (the journal), or one issue's story",
		Long: `Logs prints the journal's lines of team TEAM, or with ISSUE only that
issue's, in order: the controller's decisions, the helper's spawns, kills
and recoveries, and each worker's agent starts, states and exits. Each line
shows its time, its source (controller, helper, or the worker's unit) and
its message, without the team, session and unit IDs (and the issue, when
given) that --json and journalctl show. Only your own processes' lines are
shown.

Every line Legion logs carries the journal fields LEGION_TEAM and, where
they apply, LEGION_ISSUE, LEGION_MODE, LEGION_SESSION (the agent
conversation's session ID) and LEGION_UNIT (the worker unit it is about),
so the same lines are journalctl --user LEGION_TEAM=TEAM LEGION_ISSUE=ISSUE.
An agent's own output is not in the journal: legion sessions logs NAME
prints a session's transcript.

Logs reads the journal with journalctl --output=json (journald's own
reader). It fails, saying why and what to do, when journald does not run
or you cannot read the journal your lines are in: with a volatile journal
(no /var/log/journal) they go to the system journal, which only root and
the systemd-journal and adm groups read; legion doctor checks this.

Exit status: 0 when the lines were printed (none is not an error), 1 when
the journal could not be read, 2 for bad arguments.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageError{fmt.Errorf("%s: want TEAM and an optional ISSUE, got %d arguments (usage: %s)", cmd.CommandPath(), len(args), cmd.UseLine())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			_, t, err := loadTeam(g, args[0])
			if err != nil {
				return err
			}
			q := journal.Query{Team: t.Name, UID: os.Getuid(), Follow: follow, Lines: lines}
			if len(args) == 2 {
				q.Issue = args[1]
			}
			return runLogs(cmd.Context(), cmd.OutOrStdout(), q, asJSON)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines as they are logged (until Ctrl-C)")
	cmd.Flags().IntVarP(&lines, "lines", "n", 0, "start with the last `N` lines only (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object a line: {"time", "source", "unit", "priority", "message", "team", "issue", "mode", "session", "about_unit", ...}`)
	return cmd
}

func runLogs(ctx context.Context, out io.Writer, q journal.Query, asJSON bool) error {
	if q.Lines < 0 {
		return usageError{fmt.Errorf("--lines %d: want 0 or more", q.Lines)}
	}
	enc := json.NewEncoder(out)
	err := journal.Read(ctx, q, func(e journal.Entry) error {
		var werr error
		if asJSON {
			werr = enc.Encode(struct {
				journal.Entry
				Source string `json:"source"`
			}{e, logSource(e)})
		} else {
			_, werr = io.WriteString(out, logLine(e, q))
		}
		if werr != nil {
			return &api.OutputError{Err: werr}
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		what := "team " + q.Team
		if q.Issue != "" {
			what = "issue " + q.Issue + " of team " + q.Team
		}
		return fmt.Errorf("logs of %s: %w", what, err)
	}
	return nil
}

// logLine is one entry as legion logs prints it: time, source, message.
// The message goes without what the query and the source already say: the
// team, the issue when q has one, and the session and unit (long IDs,
// which --json keeps).
func logLine(e journal.Entry, q journal.Query) string {
	msg := e.Message
	drop := []struct{ key, v string }{{"team", e.Team}, {"session", e.Session}, {"unit", e.About}}
	if q.Issue != "" {
		drop = append(drop, struct{ key, v string }{"issue", e.Issue})
	}
	for _, d := range drop {
		if d.v != "" {
			msg = strings.Replace(msg, journal.FormatAttr(d.key, d.v), "", 1)
		}
	}
	msg = strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n    ")
	return e.Time.Local().Format("2006-01-02 15:04:05.000") + "  " + logSource(e) + "  " + msg + "\n"
}

// logSource names who wrote e: the helper, a controller, or the worker's
// unit (another unit, or the program, for an entry of neither).
func logSource(e journal.Entry) string {
	switch {
	case e.Unit == unitname.HelperUnit:
		return "helper"
	case isController(e.Unit):
		return "controller"
	case e.Unit != "":
		return e.Unit
	}
	return e.Ident
}

func isController(unit string) bool {
	_, err := unitname.ParseControllerUnit(unit)
	return err == nil
}
