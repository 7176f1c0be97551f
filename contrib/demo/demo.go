package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sandbox"
	"github.com/legion-dev/legion/units/unitname"
)

// DefaultTimeout bounds the wait for every issue to reach Done.
const DefaultTimeout = 5 * time.Minute

// ErrNotDone is wrapped by Run's error when some issue did not reach Done.
var ErrNotDone = errors.New("not every demo issue reached Done")

// Options configure Run.
type Options struct {
	// Bin is the absolute path of the legion binary the units and agents
	// run (os.Executable() for `legion demo`).
	Bin string
	// TTY draws a live board redrawn in place (ANSI); false prints a plain
	// line whenever something changes.
	TTY bool
	// Keep waits, once the issues are Done, until ctx ends (Ctrl-C) before
	// stopping units, and leaves the temp dir (workspace, config, script)
	// in place. A private manager cannot outlive this process, so "keep"
	// means "keep until interrupted".
	Keep bool
	// Sandbox uses a private manager even when the user's is reachable
	// (root only).
	Sandbox bool
	// Timeout bounds the wait for every issue to reach Done; DefaultTimeout
	// when zero.
	Timeout time.Duration
	// Out gets the board, progress lines and the final status.
	Out io.Writer
	// Log gets details (what is started and stopped); nil discards them.
	Log *slog.Logger
	// Agent is AgentScripted (the default, "") or AgentClaude: the real
	// Claude Code CLI at ClaudeCode, against a fake of the Anthropic API
	// that this process serves on loopback for the demo's length.
	Agent string
	// ClaudeCode is the claude binary for AgentClaude (see ClaudeCode()).
	ClaudeCode string
	// Web serves the dashboard (package dashboard) from this process
	// on a free loopback port while the demo runs, and prints its login
	// URL before the issues start moving.
	Web bool
}

// Issues are the demo's three issues.
var Issues = []string{
	"Add a greeting to the README",
	"Write down how to run the tests",
	"List the demo's moving parts",
}

// Run runs the demo: see the package doc. It returns nil only when every
// issue reached Done and cleanup succeeded.
func Run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if !filepath.IsAbs(o.Bin) {
		return fmt.Errorf("demo: legion binary %q: want an absolute path", o.Bin)
	}
	switch o.Agent {
	case "", AgentScripted:
	case AgentClaude:
		if !filepath.IsAbs(o.ClaudeCode) {
			return fmt.Errorf("demo: Claude Code binary %q: want an absolute path (see ClaudeCode)", o.ClaudeCode)
		}
	default:
		return fmt.Errorf("demo: agent %q: want %q or %q", o.Agent, AgentScripted, AgentClaude)
	}
	d := &run{o: o}
	defer func() {
		if cerr := d.cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := d.setUp(ctx); err != nil {
		return err
	}
	runErr := d.watch(ctx)
	d.printStatus(ctx)
	if runErr == nil && o.Keep {
		d.printKeep()
		<-ctx.Done()
	}
	return runErr
}

// run is one demo's state, in the order setUp makes it and cleanup
// undoes it.
type run struct {
	o       Options
	tmp     string                // the demo's temp dir
	sb      *sandbox.Sandbox      // nil with the user's manager
	api     *anthropictest.Server // the fake Anthropic API, with AgentClaude
	mgr     *units.Manager
	unitDir string
	team    string // team name
	short   string // team short id
	state   string // $XDG_STATE_HOME/legion
	store   *local.Store
	started bool // units installed: Uninstall at cleanup

	// With the user's manager: what to remove besides the team's dirs.
	left      *leftovers
	worktrees string   // the team's worktree dir
	issues    []string // the demo's issue IDs

	stopWeb func() error // stops the dashboard of Options.Web; nil without
}

// watch polls the tracker and the helper until every issue is Done and no
// worker of the team is live, or the timeout.
func (d *run) watch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	b := newBoard(d.o.Out, d.o.TTY, d.team)
	var last []row
	for {
		rows, live, err := d.snapshot(ctx)
		if err != nil && ctx.Err() == nil {
			d.o.Log.Debug("demo: snapshot", "err", err)
		}
		if err == nil {
			b.update(rows)
			last = rows
			if allDone(rows) && live == 0 {
				b.finish()
				fmt.Fprintf(d.o.Out, "all %d issues are Done\n", len(rows))
				return nil
			}
		}
		select {
		case <-ctx.Done():
			b.finish()
			return d.stuck(last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stuck is the timeout error naming the issues that did not finish.
func (d *run) stuck(rows []row) error {
	var lines []string
	for _, r := range rows {
		if r.status != string(controller.StatusDone) {
			w := "no live worker"
			if r.worker != "" {
				w = "worker " + r.worker
			}
			lines = append(lines, fmt.Sprintf("  %s %q: %s, labels [%s], %s", r.id, r.title, r.status, strings.Join(r.labels, " "), w))
		}
	}
	if len(rows) == 0 {
		lines = append(lines, "  (the tracker could not be read)")
	}
	hint := fmt.Sprintf("see `journalctl --user -u %s` and the workers' transcripts (`legion logs`)", d.controllerUnit())
	if d.sb != nil {
		hint = "the private manager has no journal; its log follows"
	}
	msg := fmt.Sprintf("%v within %v:\n%s\n%s", ErrNotDone, d.o.Timeout, strings.Join(lines, "\n"), hint)
	if d.sb != nil {
		msg += "\n" + tail(d.sb.Log(), 40)
	}
	return errors.New(msg)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func allDone(rows []row) bool {
	if len(rows) == 0 {
		return false
	}
	for _, r := range rows {
		if r.status != string(controller.StatusDone) {
			return false
		}
	}
	return true
}

// snapshot reads the issues and the team's live sessions.
func (d *run) snapshot(ctx context.Context) ([]row, int, error) {
	issues, err := d.store.Issues(ctx)
	if err != nil {
		return nil, 0, err
	}
	workers := map[string]string{}
	live := 0
	if c, err := api.Dial(ctx); err == nil {
		res, err := c.List(ctx)
		c.Close()
		if err != nil {
			return nil, 0, err
		}
		for _, s := range res.Sessions {
			if s.Team != d.team || s.State.Ended() {
				continue
			}
			live++
			workers[s.Issue] = s.Mode + " (" + string(s.State) + ")"
		}
	} else {
		return nil, 0, err
	}
	rows := make([]row, 0, len(issues))
	for _, is := range issues {
		rows = append(rows, row{id: is.ID, title: is.Title, status: string(is.Status), labels: slices.Clone(is.Labels), worker: workers[is.ID]})
	}
	return rows, live, nil
}

func (d *run) controllerUnit() string {
	u, err := unitname.ControllerUnit(d.team)
	if err != nil {
		return "legion@" + d.team + ".service"
	}
	return u
}

// printStatus prints the first lines of `systemctl --user status` of the
// units involved.
func (d *run) printStatus(ctx context.Context) {
	fmt.Fprintln(d.o.Out)
	for _, u := range []string{d.controllerUnit(), unitname.SocketUnit, unitname.HelperUnit} {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, _ := exec.CommandContext(sctx, "systemctl", "--user", "--no-pager", "--lines=0", "status", u).Output()
		cancel()
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) > 5 {
			lines = lines[:5]
		}
		fmt.Fprintf(d.o.Out, "$ systemctl --user status %s\n%s\n\n", u, strings.Join(lines, "\n"))
	}
}

// printKeep says how to look around while the demo is kept.
func (d *run) printKeep() {
	fmt.Fprintf(d.o.Out, "--keep: everything stays up until you press Ctrl-C. In another shell:\n")
	if d.sb != nil {
		for _, kv := range d.sb.Vars() {
			fmt.Fprintf(d.o.Out, "  export %s\n", kv)
		}
	}
	fmt.Fprintf(d.o.Out, "  export LEGION_CONFIG=%s\n", os.Getenv("LEGION_CONFIG"))
	fmt.Fprintf(d.o.Out, "  %s issue list %s; %s sessions list; %s tmux %s\n", d.o.Bin, d.team, d.o.Bin, d.o.Bin, d.team)
	fmt.Fprintf(d.o.Out, "The workspace is %s (kept after Ctrl-C).\n", filepath.Join(d.tmp, "workspace"))
}
