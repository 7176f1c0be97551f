package dashboard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/ptyworker/claude"
)

// Usage is what an issue's agents used so far, summed over its sessions'
// files (every phase's; a retro's is in its implementer's session).
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	// CostUSD is the cost the agents reported (Claude Code's cost-state
	// lines); nil when none did (Codex, the scripted agent, an older
	// Claude Code): the tokens are all there is.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Files are the session files read (for a person checking the sums).
	Files []string `json:"files,omitempty"`
}

// Total is every token counted.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheCreationTokens
}

// add adds v to u; counts stop at the largest int64 instead of wrapping
// (a corrupt file's huge numbers).
func (u *Usage) add(v Usage) {
	u.InputTokens = satAdd(u.InputTokens, v.InputTokens)
	u.OutputTokens = satAdd(u.OutputTokens, v.OutputTokens)
	u.CacheReadTokens = satAdd(u.CacheReadTokens, v.CacheReadTokens)
	u.CacheCreationTokens = satAdd(u.CacheCreationTokens, v.CacheCreationTokens)
	if v.CostUSD != nil {
		c := *v.CostUSD
		if u.CostUSD != nil {
			c += *u.CostUSD
		}
		u.CostUSD = &c
	}
	u.Files = append(u.Files, v.Files...)
}

// satAdd adds two counts of 0 or more, stopping at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// maxUsageLine bounds one line of a session file; a longer one (a huge
// tool result) is skipped, not an error: it holds no usage.
const maxUsageLine = 8 << 20

// claudeUsageLine is the part of a Claude Code session file line that
// usage reads: an assistant message's usage (written once per content
// block, with the message's id: counted once), or a cost-state line (the
// session's running total cost: it goes on across a resume, same
// startTime, so its largest value is the session's).
type claudeUsageLine struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string      `json:"id"`
		Usage *claudeUsed `json:"usage"`
	} `json:"message"`
	TotalCostUSD *float64 `json:"totalCostUSD"`
}

type claudeUsed struct {
	Input         int64 `json:"input_tokens"`
	Output        int64 `json:"output_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
}

// ParseClaudeUsage sums the usage of one Claude Code session file (or a
// subagent's) read from r: each assistant message's usage once (by its
// message id; the last line of an id counts), and the largest cost-state
// total. Lines that are not JSON, partial, or of another shape are
// skipped: the format has no schema and grows (see the session format
// notes); negative counts are refused as corrupt.
func ParseClaudeUsage(r io.Reader) (Usage, error) {
	var u Usage
	byID := map[string]claudeUsed{}
	var anon []claudeUsed
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxUsageLine)
		if bytes.Contains(line, []byte(`"usage"`)) || bytes.Contains(line, []byte(`"cost-state"`)) {
			var l claudeUsageLine
			if json.Unmarshal(line, &l) == nil {
				switch {
				case l.Type == "assistant" && l.Message != nil && l.Message.Usage != nil:
					if l.Message.ID == "" {
						anon = append(anon, *l.Message.Usage)
					} else {
						byID[l.Message.ID] = *l.Message.Usage
					}
				case l.Type == "cost-state" && l.TotalCostUSD != nil:
					c := *l.TotalCostUSD
					if c < 0 {
						return Usage{}, fmt.Errorf("cost-state totalCostUSD %v: want a cost of 0 or more", c)
					}
					if u.CostUSD == nil || c > *u.CostUSD {
						u.CostUSD = &c
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Usage{}, err
		}
	}
	for _, m := range append(anon, mapValues(byID)...) {
		if m.Input < 0 || m.Output < 0 || m.CacheRead < 0 || m.CacheCreation < 0 {
			return Usage{}, fmt.Errorf("usage %+v: want token counts of 0 or more", m)
		}
		u.add(Usage{InputTokens: m.Input, OutputTokens: m.Output, CacheReadTokens: m.CacheRead, CacheCreationTokens: m.CacheCreation})
	}
	return u, nil
}

func mapValues(m map[string]claudeUsed) []claudeUsed {
	out := make([]claudeUsed, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// codexUsageLine is the part of a Codex rollout line that usage reads:
// event_msg token_count, whose info.total_token_usage is the
// conversation's running total (so the last one counts).
type codexUsageLine struct {
	Type    string `json:"type"`
	Payload *struct {
		Type string `json:"type"`
		Info *struct {
			Total *struct {
				Input       int64 `json:"input_tokens"`
				CachedInput int64 `json:"cached_input_tokens"`
				Output      int64 `json:"output_tokens"`
				Reasoning   int64 `json:"reasoning_output_tokens"`
			} `json:"total_token_usage"`
		} `json:"info"`
	} `json:"payload"`
}

// ParseCodexUsage reads a Codex rollout file from r: the last token_count
// event's total_token_usage (cached input is counted as cache reads and
// taken out of the input; reasoning tokens are part of the output, as
// Codex counts them). Codex records no cost. Other lines are skipped.
func ParseCodexUsage(r io.Reader) (Usage, error) {
	var u Usage
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxUsageLine)
		if bytes.Contains(line, []byte(`"token_count"`)) {
			var l codexUsageLine
			if json.Unmarshal(line, &l) == nil && l.Type == "event_msg" && l.Payload != nil &&
				l.Payload.Type == "token_count" && l.Payload.Info != nil && l.Payload.Info.Total != nil {
				t := l.Payload.Info.Total
				if t.Input < 0 || t.CachedInput < 0 || t.Output < 0 {
					return Usage{}, fmt.Errorf("token_count %+v: want token counts of 0 or more", *t)
				}
				u = Usage{InputTokens: max(t.Input-t.CachedInput, 0), CacheReadTokens: min(t.CachedInput, t.Input), OutputTokens: t.Output}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Usage{}, err
		}
	}
	return u, nil
}

// readLine returns the next line of br without its newline; a line longer
// than limit is returned empty (skipped) after it is consumed. At the end
// it returns the last line (maybe partial) with io.EOF.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

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
// finisher's), each read from where its kind keeps it: a Claude Code
// session file under home's ~/.claude (with its subagents' files), or
// the rollout files of a Codex session's home. A file that is missing
// counts as nothing; one that cannot be read is an error naming it.
// Board and queue call it; files are cached until they change.
func IssueUsage(t *team.Team, home, issue string) (Usage, error) {
	var total Usage
	var errs []error
	for _, mode := range []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeFinish} {
		id, _, err := t.SessionOf(issue, mode)
		if err != nil {
			return Usage{}, err
		}
		switch t.Agent.ForMode(string(mode)).Kind {
		case config.AgentCodex:
			workerID := claude.SessionID(t.ID, issue, string(mode))
			dir := agent.CodexHome(filepath.Join(t.StateDir, "agents", workerID.String()), id)
			files, _ := filepath.Glob(filepath.Join(dir, "sessions", "*", "*", "*", "rollout-*.jsonl"))
			for _, f := range files {
				u, err := sessionUsage.file(f, ParseCodexUsage)
				errs = append(errs, err)
				total.add(u)
			}
		case config.AgentClaude, "":
			main := (&agent.Claude{}).SessionFile(home, t.Worktrees.Path(issue), id)
			files := []string{main}
			subs, _ := filepath.Glob(filepath.Join(claude.SubagentDir(main), "*.jsonl"))
			sort.Strings(subs)
			files = append(files, subs...)
			for _, f := range files {
				u, err := sessionUsage.file(f, ParseClaudeUsage)
				errs = append(errs, err)
				total.add(u)
			}
		}
	}
	return total, errors.Join(errs...)
}
