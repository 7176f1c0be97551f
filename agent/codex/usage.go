package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent"
)

// codexUsageLine is the part of a Codex rollout line that usage reads:
// event_msg token_count, whose info.total_token_usage is the
// conversation's running total (so the last one counts), and turn_context,
// whose payload names the turn's model (X33).
type codexUsageLine struct {
	Type    string `json:"type"`
	Payload *struct {
		Type  string `json:"type"`
		Model string `json:"model"` // turn_context
		Info  *struct {
			Total *struct {
				Input       int64 `json:"input_tokens"`
				CachedInput int64 `json:"cached_input_tokens"`
				Output      int64 `json:"output_tokens"`
				Reasoning   int64 `json:"reasoning_output_tokens"`
			} `json:"total_token_usage"`
		} `json:"info"`
	} `json:"payload"`
}

// ParseUsage reads a Codex rollout file from r: the last token_count
// event's total_token_usage (cached input is counted as cache reads and
// taken out of the input; reasoning tokens are part of the output, as
// Codex counts them), and the last turn_context's model. Codex records no
// cost. Other lines are skipped.
func ParseUsage(r io.Reader) (agent.Usage, error) {
	var u agent.Usage
	var model string
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := agent.ReadLine(br, agent.MaxUsageLine)
		if bytes.Contains(line, []byte(`"turn_context"`)) {
			var l codexUsageLine
			if json.Unmarshal(line, &l) == nil && l.Type == "turn_context" && l.Payload != nil && l.Payload.Model != "" {
				model = l.Payload.Model
			}
		}
		if bytes.Contains(line, []byte(`"token_count"`)) {
			var l codexUsageLine
			if json.Unmarshal(line, &l) == nil && l.Type == "event_msg" && l.Payload != nil &&
				l.Payload.Type == "token_count" && l.Payload.Info != nil && l.Payload.Info.Total != nil {
				t := l.Payload.Info.Total
				if t.Input < 0 || t.CachedInput < 0 || t.Output < 0 {
					return agent.Usage{}, fmt.Errorf("token_count %+v: want token counts of 0 or more", *t)
				}
				u = agent.Usage{InputTokens: max(t.Input-t.CachedInput, 0), CacheReadTokens: min(t.CachedInput, t.Input), OutputTokens: t.Output}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return agent.Usage{}, err
		}
	}
	u.Model = model
	return u, nil
}

// UsageFiles are the rollout files of conversation id's Codex home.
func (*Kind) UsageFiles(dir, home, cwd string, id uuid.UUID) []string {
	files, _ := filepath.Glob(filepath.Join(Home(dir, id), "sessions", "*", "*", "*", "rollout-*.jsonl"))
	return files
}

// ParseUsage is [ParseUsage].
func (*Kind) ParseUsage(r io.Reader) (agent.Usage, error) { return ParseUsage(r) }
