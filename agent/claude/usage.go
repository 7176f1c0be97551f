package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
)

// claudeUsageLine is the part of a Claude Code session file line that
// usage reads: an assistant message's usage (written once per content
// block, with the message's id: counted once), or a cost-state line (the
// session's running total cost: it goes on across a resume, same
// startTime, so its largest value is the session's).
type claudeUsageLine struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string      `json:"id"`
		Model string      `json:"model"`
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

// syntheticModel is the model Claude Code records on messages it made
// itself (an interrupted turn's), which no API billed.
const syntheticModel = "<synthetic>"

// ParseUsage sums the usage of one Claude Code session file (or a
// subagent's) read from r: each assistant message's usage once (by its
// message id; the last line of an id counts), and the largest cost-state
// total. Lines that are not JSON, partial, or of another shape are
// skipped: the format has no schema and grows (see the session format
// notes); negative counts are refused as corrupt.
func ParseUsage(r io.Reader) (agent.Usage, error) {
	var u agent.Usage
	var model string
	byID := map[string]claudeUsed{}
	var anon []claudeUsed
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := agent.ReadLine(br, agent.MaxUsageLine)
		if bytes.Contains(line, []byte(`"usage"`)) || bytes.Contains(line, []byte(`"cost-state"`)) {
			var l claudeUsageLine
			if json.Unmarshal(line, &l) == nil {
				switch {
				case l.Type == "assistant" && l.Message != nil && l.Message.Usage != nil:
					if m := l.Message.Model; m != "" && m != syntheticModel {
						model = m
					}
					if l.Message.ID == "" {
						anon = append(anon, *l.Message.Usage)
					} else {
						byID[l.Message.ID] = *l.Message.Usage
					}
				case l.Type == "cost-state" && l.TotalCostUSD != nil:
					c := *l.TotalCostUSD
					if c < 0 {
						return agent.Usage{}, fmt.Errorf("cost-state totalCostUSD %v: want a cost of 0 or more", c)
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
			return agent.Usage{}, err
		}
	}
	for _, m := range append(anon, slices.Collect(maps.Values(byID))...) {
		if m.Input < 0 || m.Output < 0 || m.CacheRead < 0 || m.CacheCreation < 0 {
			return agent.Usage{}, fmt.Errorf("usage %+v: want token counts of 0 or more", m)
		}
		u.Add(agent.Usage{InputTokens: m.Input, OutputTokens: m.Output, CacheReadTokens: m.CacheRead, CacheCreationTokens: m.CacheCreation})
	}
	u.Model = model
	return u, nil
}

// UsageFiles are the session file of conversation id and its subagents'
// files (claudecode.SubagentDir), in name order.
func (k *Kind) UsageFiles(dir, home, cwd string, id uuid.UUID) []string {
	main := k.SessionFile(home, cwd, id)
	subs, _ := filepath.Glob(filepath.Join(claudecode.SubagentDir(main), "*.jsonl"))
	sort.Strings(subs)
	return append([]string{main}, subs...)
}

// ParseUsage is [ParseUsage].
func (*Kind) ParseUsage(r io.Reader) (agent.Usage, error) { return ParseUsage(r) }
