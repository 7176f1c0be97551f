package dashboard

import (
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
	"github.com/legion-dev/legion/controller/team"
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
// finisher's), each read where its mode's kind keeps it and as that kind
// says ([agent.UsageReader], through the kinds' registry). A file that is missing counts as nothing; one that
// cannot be read is an error naming it. Board and queue call it; files
// are cached until they change.
func IssueUsage(t *team.Team, home, issue string) (Usage, error) {
	var total Usage
	var errs []error
	for _, mode := range []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeFinish} {
		id, _, err := t.SessionOf(issue, mode)
		if err != nil {
			return Usage{}, err
		}
		// The worker's directory, beside which its kind keeps the
		// conversation's home (codex.Home and the others).
		dir := filepath.Join(t.StateDir, "agents", claudecode.SessionID(t.ID, issue, string(mode)).String())
		k, err := kinds.For(t.Agent.ForMode(string(mode)))
		if err != nil {
			return Usage{}, err
		}
		r, ok := k.(agent.UsageReader)
		if !ok {
			continue // a custom agent records no usage Legion can read
		}
		files := r.UsageFiles(dir, home, t.Worktrees.Path(issue), id)
		parse := r.ParseUsage
		for _, f := range files {
			u, err := sessionUsage.file(f, parse)
			errs = append(errs, err)
			total.Add(u)
		}
	}
	return total, errors.Join(errs...)
}
