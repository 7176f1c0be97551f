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
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
)

// Usage is what an issue's agents used so far, summed over its sessions'
// files (every phase's; a retro's is in its implementer's session), for
// every agent kind: Claude Code, Codex, Gemini CLI and opencode. Cached
// input counts as cache reads, not input; reasoning (thinking) tokens
// count as output.
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	// CostUSD is the cost the agents reported (Claude Code's cost-state
	// lines, opencode's cost of each message); nil when none did (Codex
	// and the Gemini CLI record none; the scripted agent, an older Claude
	// Code): the tokens are all there is.
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

func mapValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
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

// geminiUsageLine is the part of a Gemini CLI chat file line that usage
// reads: a message ({"id","type":"gemini","tokens":{…}}), written again
// whenever it changes (so an id's last line counts), or a "$set" of the
// conversation's messages (a resume's history, whose model messages
// carry no tokens in 0.61.0; they count once by id if they do).
type geminiUsageLine struct {
	geminiMessage
	Set *struct {
		Messages []geminiMessage `json:"messages"`
	} `json:"$set"`
}

type geminiMessage struct {
	ID     string        `json:"id"`
	Type   string        `json:"type"`
	Tokens *geminiTokens `json:"tokens"`
}

// geminiTokens is a model message's tokens: the API's usageMetadata of
// its response (promptTokenCount, candidatesTokenCount,
// cachedContentTokenCount, thoughtsTokenCount, toolUsePromptTokenCount,
// totalTokenCount), gemini FACTS G31.
type geminiTokens struct {
	Input    int64 `json:"input"`
	Output   int64 `json:"output"`
	Cached   int64 `json:"cached"`
	Thoughts int64 `json:"thoughts"`
	Tool     int64 `json:"tool"`
}

// ParseGeminiUsage sums the tokens of one Gemini CLI chat file
// (<home>/.gemini/tmp/<project>/chats/session-*.jsonl) read from r: each
// model message once (by its id; the last line of an id counts). The
// cached tokens, part of the prompt's, are counted as cache reads and
// taken out of the input; the tool-use prompt's are input; thoughts are
// output, as the API bills them. The CLI records no cost. Lines that are
// not JSON, partial or of another shape are skipped; negative counts are
// refused as corrupt.
func ParseGeminiUsage(r io.Reader) (Usage, error) {
	byID := map[string]geminiTokens{}
	var anon []geminiTokens
	keep := func(m geminiMessage) {
		switch {
		case m.Type != "gemini" || m.Tokens == nil:
		case m.ID == "":
			anon = append(anon, *m.Tokens)
		default:
			byID[m.ID] = *m.Tokens
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxUsageLine)
		if bytes.Contains(line, []byte(`"tokens"`)) {
			var l geminiUsageLine
			if json.Unmarshal(line, &l) == nil {
				keep(l.geminiMessage)
				if l.Set != nil {
					for _, m := range l.Set.Messages {
						keep(m)
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
	var u Usage
	for _, t := range append(anon, mapValues(byID)...) {
		if t.Input < 0 || t.Output < 0 || t.Cached < 0 || t.Thoughts < 0 || t.Tool < 0 {
			return Usage{}, fmt.Errorf("gemini message tokens %+v: want token counts of 0 or more", t)
		}
		u.add(Usage{
			InputTokens:     satAdd(t.Input-min(t.Cached, t.Input), t.Tool),
			CacheReadTokens: min(t.Cached, t.Input),
			OutputTokens:    satAdd(t.Output, t.Thoughts),
		})
	}
	return u, nil
}

// opencodeUsageLine is one line of an opencode home's usage file
// (agent.OpencodeUsageFile), which Legion's plugin appends from
// opencode's message.updated events: an assistant message's tokens, as
// opencode counts them (input without the cached tokens, output without
// the reasoning tokens, opencode FACTS O27), and its cost in USD.
type opencodeUsageLine struct {
	ID     string `json:"id"`
	Tokens *struct {
		Input     int64 `json:"input"`
		Output    int64 `json:"output"`
		Reasoning int64 `json:"reasoning"`
		Cache     struct {
			Read  int64 `json:"read"`
			Write int64 `json:"write"`
		} `json:"cache"`
	} `json:"tokens"`
	Cost *float64 `json:"cost"`
}

// ParseOpencodeUsage sums an opencode home's usage file read from r: each
// message once (by its id; the last line of an id counts, the plugin
// appends one whenever the message's tokens change), reasoning tokens
// counted as output, and the messages' costs summed (nil when no line
// has one). Lines that are not JSON, partial or of another shape are
// skipped; negative counts or costs are refused as corrupt.
func ParseOpencodeUsage(r io.Reader) (Usage, error) {
	byID := map[string]opencodeUsageLine{}
	var anon []opencodeUsageLine
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxUsageLine)
		var l opencodeUsageLine
		if len(line) > 0 && json.Unmarshal(line, &l) == nil && l.Tokens != nil {
			if l.ID == "" {
				anon = append(anon, l)
			} else {
				byID[l.ID] = l
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Usage{}, err
		}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a fixed order: the float sum does not vary
	var u Usage
	for _, id := range ids {
		anon = append(anon, byID[id])
	}
	for _, m := range anon {
		t := m.Tokens
		if t.Input < 0 || t.Output < 0 || t.Reasoning < 0 || t.Cache.Read < 0 || t.Cache.Write < 0 {
			return Usage{}, fmt.Errorf("opencode message %q tokens %+v: want token counts of 0 or more", m.ID, *t)
		}
		v := Usage{InputTokens: t.Input, OutputTokens: satAdd(t.Output, t.Reasoning), CacheReadTokens: t.Cache.Read, CacheCreationTokens: t.Cache.Write}
		if m.Cost != nil {
			if *m.Cost < 0 {
				return Usage{}, fmt.Errorf("opencode message %q cost %v: want a cost of 0 or more", m.ID, *m.Cost)
			}
			v.CostUSD = m.Cost
		}
		u.add(v)
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
// finisher's), each read from where its mode's kind keeps it: a Claude
// Code session file under home's ~/.claude (with its subagents' files),
// the rollout files of a Codex session's home, the chat files of a Gemini
// session's home, or the usage file Legion's plugin writes in an opencode
// session's home. A file that is missing counts as nothing; one that
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
		// conversation's home (agent.CodexHome and the others).
		dir := filepath.Join(t.StateDir, "agents", claudecode.SessionID(t.ID, issue, string(mode)).String())
		var files []string
		var parse func(io.Reader) (Usage, error)
		switch t.Agent.ForMode(string(mode)).Kind {
		case config.AgentCodex:
			files, _ = filepath.Glob(filepath.Join(agent.CodexHome(dir, id), "sessions", "*", "*", "*", "rollout-*.jsonl"))
			parse = ParseCodexUsage
		case config.AgentGemini:
			chats := filepath.Join(agent.GeminiHome(dir, id), filepath.Dir(agent.GeminiLogsFile), "chats")
			files, _ = filepath.Glob(filepath.Join(chats, "session-*.jsonl"))
			parse = ParseGeminiUsage
		case config.AgentOpencode:
			files = []string{filepath.Join(agent.OpencodeHome(dir, id), agent.OpencodeUsageFile)}
			parse = ParseOpencodeUsage
		case config.AgentClaude, "":
			main := (&agent.Claude{}).SessionFile(home, t.Worktrees.Path(issue), id)
			subs, _ := filepath.Glob(filepath.Join(claudecode.SubagentDir(main), "*.jsonl"))
			sort.Strings(subs)
			files, parse = append([]string{main}, subs...), ParseClaudeUsage
		}
		for _, f := range files {
			u, err := sessionUsage.file(f, parse)
			errs = append(errs, err)
			total.add(u)
		}
	}
	return total, errors.Join(errs...)
}
