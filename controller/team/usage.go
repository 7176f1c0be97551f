package team

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/controller"
)

// Usage is what an issue's agents used so far: [agent.Usage], summed over
// its sessions' files (every phase's; a retro's is in its implementer's
// session), for every kind that records it.
type Usage = agent.Usage

// usageCache keeps each session file's sums until the file changes (size
// or modification time), so a board refresh reads only what grew.
type usageCache struct {
	mu    sync.Mutex
	files map[string]cachedUsage
}

type cachedUsage struct {
	size  int64
	mtime time.Time
	u     Usage
}

var sessionUsage = &usageCache{files: map[string]cachedUsage{}}

// file returns the usage of the session file path, parsed by parse; a
// missing file is zero usage.
func (c *usageCache) file(path string, parse func(io.Reader) (Usage, error)) (Usage, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Usage{}, nil
	}
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", path, err)
	}
	c.mu.Lock()
	hit, ok := c.files[path]
	c.mu.Unlock()
	if ok && hit.size == st.Size() && hit.mtime.Equal(st.ModTime()) {
		return hit.u, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", path, err)
	}
	defer f.Close()
	u, err := parse(f)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", path, err)
	}
	u.Files = []string{path}
	c.mu.Lock()
	c.files[path] = cachedUsage{size: st.Size(), mtime: st.ModTime(), u: u}
	c.mu.Unlock()
	return u, nil
}

// IssueUsage sums the tokens and cost of issue's agent sessions in team t
// (the planner's, the implementer's with its retro, the reviewer's, the
// finisher's): [PhaseUsage] of each phase, added up.
func IssueUsage(t *Team, home, issue string) (Usage, error) {
	phases, err := PhaseUsage(t, home, issue)
	var total Usage
	for _, p := range phases {
		total.Add(p.Usage)
	}
	return total, err
}

// Phase is one phase's usage of an issue.
type Phase struct {
	Mode controller.Mode
	Usage
}

// usageModes are the phases that have a conversation of their own (a
// retro's is its implementer's).
var usageModes = []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeFinish}

// PhaseUsage is the usage of each of issue's conversations in team t, in
// phase order, each read where its mode's kind keeps it and as that kind
// says ([agent.UsageReader], through the kinds' registry). A conversation
// whose agent reported no cost (Codex, the Gemini CLI) gets its tokens'
// cost at the team's budget.prices for its model. A file that is missing
// counts as nothing; one that cannot be read is an error naming it (the
// others still count). Board, queue and budgets call it; files are cached
// until they change.
func PhaseUsage(t *Team, home, issue string) ([]Phase, error) {
	var out []Phase
	var errs []error
	for _, mode := range usageModes {
		id, _, err := t.SessionOf(issue, mode)
		if err != nil {
			return nil, err
		}
		// The worker's directory, beside which its kind keeps the
		// conversation's home (codex.Home and the others).
		dir := filepath.Join(t.StateDir, "agents", claudecode.SessionID(t.ID, issue, string(mode)).String())
		k, err := kinds.For(t.Agent.ForMode(string(mode)))
		if err != nil {
			return nil, err
		}
		r, ok := k.(agent.UsageReader)
		if !ok {
			continue // a custom agent records no usage Legion can read
		}
		var files []Usage
		reported := false
		for _, f := range r.UsageFiles(dir, home, t.Worktrees.Path(issue), id) {
			u, err := sessionUsage.file(f, r.ParseUsage)
			errs = append(errs, err)
			files = append(files, u)
			reported = reported || u.CostUSD != nil
		}
		var p Phase
		p.Mode = mode
		for _, u := range files {
			if !reported {
				// A conversation whose agent reports its cost (Claude
				// Code's total covers its subagents' files) is not priced
				// again.
				u = u.Priced(t.Budget.Prices)
			}
			p.Add(u)
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// Spend is what issue's agents spent so far, per phase and in all
// (controller.SpendSource): tokens, and dollars where the agent reported
// them or budget.prices price its model (Unpriced when some tokens had
// neither). Claude Code's files are read under the user's home (HOME of
// t.LookupEnv, else this process's).
func (t *Team) Spend(ctx context.Context, issue string) (controller.Spend, error) {
	home, ok := "", false
	if t.LookupEnv != nil {
		home, ok = t.LookupEnv("HOME")
	}
	if !ok || home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return controller.Spend{}, fmt.Errorf("spend of %s: %w", issue, err)
		}
		home = h
	}
	phases, err := PhaseUsage(t, home, issue)
	var s controller.Spend
	for _, p := range phases {
		ps := controller.PhaseSpend{Mode: p.Mode, Tokens: p.Total()}
		if p.CostUSD != nil {
			ps.USD = *p.CostUSD
		} else if ps.Tokens > 0 {
			s.Unpriced = true
		}
		if ps.Tokens == 0 && ps.USD == 0 {
			continue
		}
		s.Tokens += ps.Tokens
		s.USD += ps.USD
		s.Phases = append(s.Phases, ps)
	}
	return s, err
}
