package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent"
)

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
	Model  string        `json:"model"`
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

// ParseUsage sums the tokens of one Gemini CLI chat file
// (<home>/.gemini/tmp/<project>/chats/session-*.jsonl) read from r: each
// model message once (by its id; the last line of an id counts). The
// cached tokens, part of the prompt's, are counted as cache reads and
// taken out of the input; the tool-use prompt's are input; thoughts are
// output, as the API bills them. The CLI records no cost. Lines that are
// not JSON, partial or of another shape are skipped; negative counts are
// refused as corrupt.
func ParseUsage(r io.Reader) (agent.Usage, error) {
	byID := map[string]geminiTokens{}
	var anon []geminiTokens
	var model string
	keep := func(m geminiMessage) {
		if m.Type == "gemini" && m.Model != "" {
			model = m.Model
		}
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
		line, err := agent.ReadLine(br, agent.MaxUsageLine)
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
			return agent.Usage{}, err
		}
	}
	var u agent.Usage
	for _, t := range append(anon, slices.Collect(maps.Values(byID))...) {
		if t.Input < 0 || t.Output < 0 || t.Cached < 0 || t.Thoughts < 0 || t.Tool < 0 {
			return agent.Usage{}, fmt.Errorf("gemini message tokens %+v: want token counts of 0 or more", t)
		}
		u.Add(agent.Usage{
			InputTokens:     agent.SatAdd(t.Input-min(t.Cached, t.Input), t.Tool),
			CacheReadTokens: min(t.Cached, t.Input),
			OutputTokens:    agent.SatAdd(t.Output, t.Thoughts),
		})
	}
	u.Model = model
	return u, nil
}

// UsageFiles are the chat files of conversation id's Gemini home.
func (*Kind) UsageFiles(dir, home, cwd string, id uuid.UUID) []string {
	chats := filepath.Join(Home(dir, id), filepath.Dir(LogsFile), "chats")
	files, _ := filepath.Glob(filepath.Join(chats, "session-*.jsonl"))
	return files
}

// ParseUsage is [ParseUsage].
func (*Kind) ParseUsage(r io.Reader) (agent.Usage, error) { return ParseUsage(r) }
