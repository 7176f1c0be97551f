package opencode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent"
)

// opencodeUsageLine is one line of an opencode home's usage file
// ([UsageFile]), which Legion's plugin appends from
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

// ParseUsage sums an opencode home's usage file read from r: each
// message once (by its id; the last line of an id counts, the plugin
// appends one whenever the message's tokens change), reasoning tokens
// counted as output, and the messages' costs summed (nil when no line
// has one). Lines that are not JSON, partial or of another shape are
// skipped; negative counts or costs are refused as corrupt.
func ParseUsage(r io.Reader) (agent.Usage, error) {
	byID := map[string]opencodeUsageLine{}
	var anon []opencodeUsageLine
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := agent.ReadLine(br, agent.MaxUsageLine)
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
			return agent.Usage{}, err
		}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a fixed order: the float sum does not vary
	var u agent.Usage
	for _, id := range ids {
		anon = append(anon, byID[id])
	}
	for _, m := range anon {
		t := m.Tokens
		if t.Input < 0 || t.Output < 0 || t.Reasoning < 0 || t.Cache.Read < 0 || t.Cache.Write < 0 {
			return agent.Usage{}, fmt.Errorf("opencode message %q tokens %+v: want token counts of 0 or more", m.ID, *t)
		}
		v := agent.Usage{InputTokens: t.Input, OutputTokens: agent.SatAdd(t.Output, t.Reasoning), CacheReadTokens: t.Cache.Read, CacheCreationTokens: t.Cache.Write}
		if m.Cost != nil {
			if *m.Cost < 0 {
				return agent.Usage{}, fmt.Errorf("opencode message %q cost %v: want a cost of 0 or more", m.ID, *m.Cost)
			}
			v.CostUSD = m.Cost
		}
		u.Add(v)
	}
	return u, nil
}

// UsageFiles is the usage file Legion's plugin writes in conversation
// id's opencode home ([UsageFile]).
func (*Kind) UsageFiles(dir, home, cwd string, id uuid.UUID) []string {
	return []string{filepath.Join(Home(dir, id), UsageFile)}
}

// ParseUsage is [ParseUsage].
func (*Kind) ParseUsage(r io.Reader) (agent.Usage, error) { return ParseUsage(r) }
