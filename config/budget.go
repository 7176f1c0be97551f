package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Budget is [teams.<name>] budget.*: the spend at which Legion stops an
// issue's agents, and a team's for the day. Zero is no limit. Spend is
// what the agents' own usage records say (tokens; cost where the agent
// reports it, else its tokens at Prices).
type Budget struct {
	IssueTokens int64   // all phases of one issue
	IssueUSD    float64 // all phases of one issue
	DayTokens   int64   // the team's agents in one day (local time)
	DayUSD      float64 // the team's agents in one day (local time)
	// Prices are USD per million tokens by model (a key prices every model
	// whose name starts with it; the longest wins): DefaultPrices with
	// budget.prices over them.
	Prices map[string]Price
}

// Any reports whether some limit is set.
func (b Budget) Any() bool {
	return b.IssueTokens > 0 || b.IssueUSD > 0 || b.DayTokens > 0 || b.DayUSD > 0
}

// Price is what a model's tokens cost, in USD per million tokens: input,
// output (reasoning included), cache reads and cache writes.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// PricesAsOf is when DefaultPrices were gathered.
const PricesAsOf = "2026-11-29"

// DefaultPrices are the shipped prices, USD per million tokens of each
// provider's standard tier (for prompts up to 200K tokens where a
// provider charges more above), as published (gathered PricesAsOf):
//
//   - Anthropic: docs.anthropic.com/en/docs/about-claude/pricing (Opus 4
//     and 4.1, Sonnet 4, cache writes of 5 minutes) and
//     deploybase.ai/articles/claude-api-pricing (Opus 4.5 and 4.6, Sonnet
//     4.5 and 4.6, Haiku 4.5, as of 2026-03-21), cache writes at 1.25 and
//     reads at 0.1 of the input price as Anthropic's page gives them.
//     Claude Code reports its own cost, which wins; these price a session
//     file without one.
//   - OpenAI: morphllm.com/openai-api-pricing (GPT-5.4 and 5.5, as of
//     June 2026, from OpenAI's page) and
//     fernando-nog.netlify.app/gpt-coding-model-costs-2026 (GPT-5 and the
//     Codex models, as of 2026-05-05). Codex records no cost.
//   - Google: morphllm.com/gemini-api-pricing (from ai.google.dev's
//     page), cache reads at 0.1 of the input price. The Gemini CLI
//     records no cost.
//
// opencode records each message's cost itself.
var DefaultPrices = map[string]Price{
	"claude-opus-4":         {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4-5":       {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-opus-4-6":       {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-sonnet-4":       {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-haiku-4-5":      {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
	"gpt-5":                 {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5.2":               {Input: 1.75, Output: 14, CacheRead: 0.175},
	"gpt-5.3-codex":         {Input: 1.75, Output: 14, CacheRead: 0.175},
	"gpt-5.4":               {Input: 2.5, Output: 15, CacheRead: 0.25},
	"gpt-5.4-mini":          {Input: 0.75, Output: 4.5, CacheRead: 0.075},
	"gpt-5.5":               {Input: 5, Output: 30, CacheRead: 0.5},
	"gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gemini-2.5-flash":      {Input: 0.3, Output: 2.5, CacheRead: 0.03},
	"gemini-2.5-flash-lite": {Input: 0.1, Output: 0.4, CacheRead: 0.01},
	"gemini-3-flash":        {Input: 0.5, Output: 3, CacheRead: 0.05},
	"gemini-3.1-pro":        {Input: 2, Output: 12, CacheRead: 0.2},
	"gemini-3.5-flash":      {Input: 1.5, Output: 9, CacheRead: 0.15},
}

// maxBudgetTokens and maxBudgetUSD bound the budget keys.
const (
	maxBudgetTokens = 1 << 50
	maxBudgetUSD    = 1e9
)

// usdValue is an amount of US dollars from 0 to maxBudgetUSD (an integer
// or a float in TOML).
func usdValue(v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		return 0, wrongType("a number of US dollars such as 25 or 2.5", v)
	}
	if math.IsNaN(f) || f < 0 || f > maxBudgetUSD {
		return 0, fmt.Errorf("%v is out of range: expected a number of US dollars from 0 to %g", f, float64(maxBudgetUSD))
	}
	return f, nil
}

// pricesValue is budget.prices: a table of model = { input = …, output =
// …, cache_read = …, cache_write = … } (USD per million tokens; a missing
// field is 0), merged over DefaultPrices.
func pricesValue(v any) (map[string]Price, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, wrongType(`a table such as { "gpt-5" = { input = 1.25, output = 10, cache_read = 0.125 } }`, v)
	}
	out := maps.Clone(DefaultPrices)
	var errs []error
	for _, model := range slices.Sorted(maps.Keys(m)) {
		fields, ok := m[model].(map[string]any)
		if model == "" || !ok {
			errs = append(errs, fmt.Errorf("%q: %w", model, wrongType("a model name with a table such as { input = 1.25, output = 10 }", m[model])))
			continue
		}
		var p Price
		for _, f := range slices.Sorted(maps.Keys(fields)) {
			var dst *float64
			switch f {
			case "input":
				dst = &p.Input
			case "output":
				dst = &p.Output
			case "cache_read":
				dst = &p.CacheRead
			case "cache_write":
				dst = &p.CacheWrite
			default:
				errs = append(errs, fmt.Errorf("%s.%s: unknown field: expected input, output, cache_read or cache_write", model, f))
				continue
			}
			usd, err := usdValue(fields[f])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", model, f, err))
				continue
			}
			*dst = usd
		}
		out[model] = p
	}
	return out, errors.Join(errs...)
}
