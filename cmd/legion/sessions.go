package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

func newSessionsCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List, inspect, follow and stop agent sessions",
		Long: `Every agent session is a transient systemd unit running legion-pty-worker,
or, for a team with engine = "kubernetes", a Job on its cluster (logs, like
attach and send, then reach its pod through the API server's exec). These
commands ask the helper (started on demand by legion.socket).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSessionsListCmd(), newSessionsStatusCmd(), newSessionsLogsCmd(), newSessionsKillCmd())
	return cmd
}

func newSessionsListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List sessions with their state (a failed or lost one with its cause), and the helper's last recovery",
		Long: `List shows every session with its state (a failed or lost one with its
cause), where it runs (WHERE: "here" for a unit of your user manager,
"k8s:NODE" for a Job's pod on a team's cluster) and the counts of the
helper's last recovery.

Right after the helper started (on demand, or again after a crash), it lists
the sessions as soon as it has read systemd's units and the workers' registry
files, before every worker has answered: such a session shows the state its
unit and registry entry give, marked "(checking)" ("checking": true with
--json), until the helper has heard from its worker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSessionsList(cmd.Context(), cmd.OutOrStdout(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {daemon_id, sessions: [...], recovery: {...}, quarantined: [...]}")
	return cmd
}

func runSessionsList(ctx context.Context, out io.Writer, asJSON bool) error {
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.List(ctx)
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	if asJSON {
		if res.Sessions == nil {
			res.Sessions = []api.Session{}
		}
		return writeJSON(out, res)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tAGENT\tTEAM\tISSUE\tMODE\tRESTARTS\tPID\tLAST ACTIVITY\tWHERE\tUNIT")
	for _, s := range res.Sessions {
		state := string(s.State)
		if s.Checking {
			state += " (checking)" // the helper just started and has yet to hear from its worker
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.Name, state, agentColumn(s.Agent), s.Team, dash(s.Issue), dash(s.Mode),
			s.Restarts, pidText(s.PID), ago(s.LastActivity), where(s), s.Unit)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range res.Sessions {
		switch s.State {
		case api.StateFailed:
			if s.Engine == api.EngineKubernetes {
				fmt.Fprintf(out, "\n%s failed on Kubernetes: %s\n  it stays failed until `legion sessions kill %s`\n", s.Name, cmp.Or(s.Cause, "see its Job"), s.Name)
				continue
			}
			fmt.Fprintf(out, "\n%s failed: %s\n  see `journalctl --user -u '%s'`; it stays failed until `systemctl --user reset-failed '%s'`\n",
				s.Name, cmp.Or(s.Cause, "see its unit"), s.Unit, s.Unit)
		case api.StateLost:
			fmt.Fprintf(out, "\n%s lost: %s\n", s.Name, s.Cause)
		}
	}
	r := res.Recovery
	fmt.Fprintf(out, "\nlast recovery: %d recovered, %d pruned, %d lost, %d quarantined, %d failed", r.Recovered, r.Pruned, r.Lost, r.Quarantined, r.Failed)
	if res.Checking > 0 {
		fmt.Fprintf(out, " (under way: %d of them being checked)", res.Checking)
	}
	fmt.Fprintln(out)
	for _, q := range res.Quarantined {
		fmt.Fprintf(out, "quarantined %s: %s (%s)\n", q.Name, q.Reason, q.Path)
	}
	return nil
}

// where is where a session runs: "here" (a unit of this user's manager),
// or "k8s:NODE" ("k8s:-" while its pod waits for a node).
func where(s api.Session) string {
	if s.Engine == api.EngineKubernetes {
		return "k8s:" + dash(s.Node)
	}
	return "here"
}

func newSessionsStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show one session",
		Long: `Status shows one session: its state, unit, restarts, last exit, what its
agent is doing, and its worker unit's memory and CPU use with its limits
(MemoryCurrent, CPUUsageNSec, MemoryMax=, CPUWeight= as systemd reports them;
"not accounted", and why, where systemd reports no figure). Last, for a
dispatched worker, the instructions its agent was told (its prompt: the
phase's instructions rendered for the issue).`,
		Args: exactArgs(1, "a session name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSessionsStatus(cmd.Context(), cmd.OutOrStdout(), args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the session as JSON")
	return cmd
}

func runSessionsStatus(ctx context.Context, out io.Writer, name string, asJSON bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.Status(ctx, name)
	if err != nil {
		return fmt.Errorf("status of session %s: %w", name, err)
	}
	if asJSON {
		return writeJSON(out, s)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"name", s.Name}, {"state", string(s.State)}, {"id", s.ID}, {"unit", s.Unit}, {"team", s.Team},
		{"issue", dash(s.Issue)}, {"mode", dash(s.Mode)}, {"restarts", strconv.FormatUint(uint64(s.Restarts), 10)},
		{"pid", pidText(s.PID)}, {"last activity", ago(s.LastActivity)}, {"last exit", exitText(s.Exit)},
		{"cause", dash(s.Cause)}, {"agent", agentLine(s.Agent)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if r := s.Resources; r != nil {
		fmt.Fprintf(tw, "memory:\t%s\n", memoryText(r))
		fmt.Fprintf(tw, "cpu:\t%s\n", cpuText(r))
		if r.NotAccounted != "" {
			fmt.Fprintf(tw, "not accounted:\t%s\n", r.NotAccounted)
		}
	}
	if a := s.Agent; a != nil {
		for i, q := range a.Questions {
			fmt.Fprintf(tw, "question %d:\t%s\n", i+1, questionText(q))
		}
		if a.LastMessage != "" {
			fmt.Fprintf(tw, "last message:\t%s\n", oneLine(a.LastMessage, 200))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Instructions != "" {
		// Last and whole: what the agent was told, as it was told.
		fmt.Fprintf(out, "\ninstructions (the agent's prompt):\n%s", indent(s.Instructions, "  "))
	}
	return nil
}

// indent prefixes every line of text with prefix; text ends in a newline.
func indent(text, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l != "" {
			b.WriteString(prefix)
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// memoryText is a session's memory use and limit: "12.5 MiB (max 2.0
// GiB)", or "not accounted".
func memoryText(r *api.Resources) string {
	s := "not accounted"
	if r.MemoryBytes != nil {
		s = bytesText(*r.MemoryBytes)
	}
	if r.MemoryMax != nil {
		s += " (max " + bytesText(*r.MemoryMax) + ")"
	}
	return s
}

// cpuText is a session's CPU time and weight: "1m2.5s (weight 50)", or
// "not accounted".
func cpuText(r *api.Resources) string {
	s := "not accounted"
	if r.CPUNSec != nil {
		s = time.Duration(*r.CPUNSec).Round(time.Millisecond).String()
	}
	if r.CPUWeight != nil {
		s += " (weight " + strconv.FormatUint(*r.CPUWeight, 10) + ")"
	}
	return s
}

// bytesText writes n in B, KiB, MiB or GiB with one decimal.
func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB", "TiB"}[i])
}

// agentColumn is the agent's state in a listing: its state, and the tool
// it uses or waits to use.
func agentColumn(a *api.Agent) string {
	if a == nil {
		return "-"
	}
	if a.Tool != "" && (a.State == api.AgentWorking || a.State == api.AgentWaitingPermission) {
		return string(a.State) + " (" + a.Tool + ")"
	}
	return string(a.State)
}

// agentLine is the agent's state in full, with how long it has been in it.
func agentLine(a *api.Agent) string {
	if a == nil {
		return "- (no hook events: a custom agent, or none yet)"
	}
	t := oneLine(proto.DescribeAgent(a), 300)
	if !a.Since.IsZero() {
		t += " (since " + ago(&a.Since) + ")"
	}
	return t
}

func questionText(q api.Question) string {
	t := oneLine(q.Question, 200)
	if len(q.Options) > 0 {
		t += " [" + strings.Join(q.Options, " | ") + "]"
	}
	return t
}

// oneLine is s on one line, at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}

func newSessionsLogsCmd() *cobra.Command {
	var (
		follow bool
		last   int64
	)
	cmd := &cobra.Command{
		Use:   "logs [-f] [-c N] NAME",
		Short: "Print a session's transcript (with -f, follow it across restarts)",
		Args:  exactArgs(1, "a session name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if last < 0 {
				return usageError{fmt.Errorf("--bytes %d: want a byte count, 0 or more", last)}
			}
			return runSessionsLogs(cmd.Context(), cmd.OutOrStdout(), api.LogsArgs{Name: args[0], Tail: last}, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the session ends (or Ctrl-C)")
	cmd.Flags().Int64VarP(&last, "bytes", "c", 0, "print only the transcript's last `N` bytes (as tail -c; then, with -f, what follows); 0: all of it")
	return cmd
}

func runSessionsLogs(ctx context.Context, out io.Writer, args api.LogsArgs, follow bool) error {
	name := args.Name
	if err := checkName(name); err != nil {
		return err
	}
	if follow {
		_, err := api.FollowLogs(ctx, args, out)
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("logs of session %s: %w", name, err)
		}
		return nil
	}
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Logs(ctx, args, out); err != nil {
		return fmt.Errorf("logs of session %s: %w", name, err)
	}
	return nil
}

func newSessionsKillCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "kill NAME",
		Short: "Stop a session for good (systemd stops its unit; the transcript is kept)",
		Long: `Kill stops the session's unit for good and keeps its transcript. A session
that a reboot cut (state lost) has nothing left to stop: kill forgets it
(exited from then on; its transcript stays, and legion sessions status
and logs still find it).`,
		Args: exactArgs(1, "a session name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSessionsKill(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
}

func runSessionsKill(ctx context.Context, out io.Writer, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	before, err := c.Status(ctx, name)
	if err != nil {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	s, err := c.Kill(ctx, name)
	if err != nil {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	if before.State == api.StateLost {
		_, err = fmt.Fprintf(out, "session %s forgotten (the machine had rebooted while it ran)\n", s.Name)
		return err
	}
	_, err = fmt.Fprintf(out, "session %s stopped: %s\n", s.Name, exitText(s.Exit))
	return err
}

// checkName validates a session name before asking the helper (which
// checks again), as a usage error.
func checkName(name string) error {
	if err := api.ValidateName(name); err != nil {
		return usageError{err}
	}
	return nil
}

// exactArgs is cobra.ExactArgs with a message that says what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s: want %s, got %d arguments (usage: %s)", cmd.CommandPath(), what, len(args), cmd.UseLine())}
		}
		return nil
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pidText(pid int) string {
	if pid == 0 {
		return "-"
	}
	return strconv.Itoa(pid)
}

func ago(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	d := time.Since(*t)
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String() + " ago"
}

func exitText(e *api.Exit) string {
	if e == nil {
		return "-"
	}
	return e.String()
}
