// Package kinds is the registry of agent kinds: one line per kind, naming
// the package that implements it. [For] picks a team's kind from its
// agent table; [All] lists them for `legion doctor`, the dashboard's
// usage and the tests that run every kind.
//
// Adding a kind is a directory under agent/ (its [agent.Kind], facts,
// doctor check, usage records, test fakes), one line here and one pin in
// agent/cliversion. This package holds no kind's code.
package kinds

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/agent/codex"
	"github.com/legion-dev/legion/agent/custom"
	"github.com/legion-dev/legion/agent/gemini"
	"github.com/legion-dev/legion/agent/opencode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// registry is every kind, by agent.kind's spelling, in the order the docs
// list them.
var registry = []struct {
	kind config.AgentKind
	new  func(config.Agent) agent.Kind
}{
	{config.AgentClaude, claude.New},
	{config.AgentCodex, codex.New},
	{config.AgentGemini, gemini.New},
	{config.AgentOpencode, opencode.New},
	{config.AgentCustom, custom.New},
}

// For is the kind a team's agent table selects (agent.kind; "" is claude).
func For(a config.Agent) (agent.Kind, error) {
	k := a.Kind
	if k == "" {
		k = config.AgentClaude
	}
	for _, r := range registry {
		if r.kind == k {
			return r.new(a), nil
		}
	}
	names := make([]string, len(registry))
	for i, r := range registry {
		names[i] = fmt.Sprintf("%q", r.kind)
	}
	return nil, fmt.Errorf("unknown agent kind %q: expected one of %s", a.Kind, strings.Join(names, ", "))
}

// All is every kind, each with the default agent table of its kind
// (config.KindArgv's argv), in the registry's order.
func All() []agent.Kind {
	out := make([]agent.Kind, len(registry))
	for i, r := range registry {
		out[i] = r.new(config.Agent{Kind: r.kind})
	}
	return out
}

// HookDialect is the hook dialect of the kind named name, when it has one
// ([agent.HookTranslator]): what `legion hook` translates an agent's
// payloads with when its environment names a dialect.
func HookDialect(name string) (proto.HookDialect, bool) {
	for _, r := range registry {
		if string(r.kind) != name {
			continue
		}
		if t, ok := r.new(config.Agent{Kind: r.kind}).(agent.HookTranslator); ok {
			return t.HookDialect(), true
		}
	}
	return proto.HookDialect{}, false
}

// PreparePod runs, in a pod, the Prepare the controller planned for it
// (agent.PodPrepare, read from file: `legion agent prepare FILE`, a
// prepare command of the session's spawn): the kind's files are made on
// the volume, as the pod's user.
func PreparePod(ctx context.Context, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("prepare the agent: %w", err)
	}
	p, err := agent.DecodePodPrepare(data, file)
	if err != nil {
		return fmt.Errorf("prepare the agent: %w", err)
	}
	kind, err := For(p.Agent)
	if err != nil {
		return fmt.Errorf("prepare the agent: %s: %w", file, err)
	}
	return agent.RunPodPrepare(ctx, kind, p)
}

var (
	_ agent.UserConfiger = (*codex.Kind)(nil)
	_ agent.UserConfiger = (*gemini.Kind)(nil)
	_ agent.UserConfiger = (*opencode.Kind)(nil)
)
