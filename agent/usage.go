package agent

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/config"
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
	// Model is the model of the last message with usage, as the agent
	// recorded it ("" when it did not): what [Usage.Priced] prices the
	// tokens of a file whose agent reported no cost at.
	Model string `json:"model,omitempty"`
	// Files are the session files read (for a person checking the sums).
	Files []string `json:"files,omitempty"`
}

// Total is every token counted.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheCreationTokens
}

// Price is what a model's tokens cost, in USD per million tokens
// (legion.toml's budget.prices).
type Price = config.Price

// PriceOf is the price of model in prices, whose keys are model names or
// their prefixes ("gpt-5" prices "gpt-5-codex"): the longest key model
// starts with. False when none does.
func PriceOf(prices map[string]Price, model string) (Price, bool) {
	best, found := "", false
	for k := range prices {
		if k != "" && len(model) >= len(k) && model[:len(k)] == k && len(k) >= len(best) {
			best, found = k, true
		}
	}
	return prices[best], found
}

// Priced is u with CostUSD set from its tokens at its model's price in
// prices when the agent reported no cost (Codex, the Gemini CLI); u as
// it is when it has a cost, or no model, or its model has no price.
func (u Usage) Priced(prices map[string]Price) Usage {
	if u.CostUSD != nil || u.Total() == 0 {
		return u
	}
	p, ok := PriceOf(prices, u.Model)
	if !ok {
		return u
	}
	c := (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheCreationTokens)*p.CacheWrite) / 1e6
	u.CostUSD = &c
	return u
}

// Add adds v to u; counts stop at the largest int64 instead of wrapping
// (a corrupt file's huge numbers).
func (u *Usage) Add(v Usage) {
	u.InputTokens = SatAdd(u.InputTokens, v.InputTokens)
	u.OutputTokens = SatAdd(u.OutputTokens, v.OutputTokens)
	u.CacheReadTokens = SatAdd(u.CacheReadTokens, v.CacheReadTokens)
	u.CacheCreationTokens = SatAdd(u.CacheCreationTokens, v.CacheCreationTokens)
	if v.CostUSD != nil {
		c := *v.CostUSD
		if u.CostUSD != nil {
			c += *u.CostUSD
		}
		u.CostUSD = &c
	}
	if v.Model != "" {
		u.Model = v.Model
	}
	u.Files = append(u.Files, v.Files...)
}

// SatAdd adds two counts of 0 or more, stopping at math.MaxInt64.
func SatAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// MaxUsageLine bounds one line of a session file; a longer one (a huge
// tool result) is skipped, not an error: it holds no usage.
const MaxUsageLine = 8 << 20

// ReadLine returns the next line of br without its newline; a line longer
// than limit is returned empty (skipped) after it is consumed. At the end
// it returns the last line (maybe partial) with io.EOF.
func ReadLine(br *bufio.Reader, limit int) ([]byte, error) {
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

// UsageReader is a kind whose agents record what they used (tokens, cost)
// where Legion can read it: the dashboard's spend, and budgets.
type UsageReader interface {
	// UsageFiles are the files in which conversation id records its usage
	// (one that does not exist yet counts as nothing): dir is its worker's
	// directory (Session.Dir), home and cwd are as for SessionFile.
	UsageFiles(dir, home, cwd string, id uuid.UUID) []string
	// ParseUsage sums the usage recorded in one of those files, read from
	// r. Lines it does not know are skipped; a count that cannot be true
	// (negative) is an error.
	ParseUsage(r io.Reader) (Usage, error)
}
