package main

import (
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

// TestAgentColumns: how `legion sessions list` and `status` show the
// agent's state from its hooks.
func TestAgentColumns(t *testing.T) {
	since := time.Now().Add(-3 * time.Minute)
	tests := []struct {
		name         string
		a            *api.Agent
		column, line string
	}{
		{"no hooks", nil, "-", "- (no hook events: a custom agent, or none yet)"},
		{"working", &api.Agent{State: api.AgentWorking, Tool: "Bash", Since: since}, "working (Bash)", "working (Bash) (since 3m0s ago)"},
		{"waiting for permission", &api.Agent{State: api.AgentWaitingPermission, Tool: "Bash", Command: "rm -rf\nx", Since: since},
			"waiting_permission (Bash)", "waiting for permission: Bash rm -rf x (since 3m0s ago)"},
		{"idle", &api.Agent{State: api.AgentIdle, Since: since}, "idle", "idle at its prompt (since 3m0s ago)"},
		{"api error", &api.Agent{State: api.AgentAPIError, Error: "rate_limit: API Error: Request rejected (429)", Since: since},
			"api_error", "failed at the API: rate_limit: API Error: Request rejected (429) (since 3m0s ago)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentColumn(tt.a); got != tt.column {
				t.Errorf("agentColumn = %q; want %q", got, tt.column)
			}
			if got := agentLine(tt.a); got != tt.line {
				t.Errorf("agentLine = %q; want %q", got, tt.line)
			}
		})
	}
	q := api.Question{Question: "Ship it?", Options: []string{"yes", "no"}}
	if got := questionText(q); got != "Ship it? [yes | no]" {
		t.Errorf("questionText = %q", got)
	}
	if got := oneLine(strings.Repeat("é", 200), 11); got != "ééééé..." {
		t.Errorf("oneLine cut = %q; want whole characters", got)
	}
}

func TestResourcesText(t *testing.T) {
	n := func(v uint64) *uint64 { return &v }
	tests := []struct {
		name        string
		r           api.Resources
		memory, cpu string
	}{
		{"accounted with limits", api.Resources{MemoryBytes: n(13 << 20), CPUNSec: n(62_500_000_000), MemoryMax: n(2 << 30), CPUWeight: n(50)}, "13.0 MiB (max 2.0 GiB)", "1m2.5s (weight 50)"},
		{"no limits", api.Resources{MemoryBytes: n(512), CPUNSec: n(1_000_000)}, "512 B", "1ms"},
		{"not accounted", api.Resources{MemoryMax: n(64 << 20), NotAccounted: "why"}, "not accounted (max 64.0 MiB)", "not accounted"},
		{"kibibytes", api.Resources{MemoryBytes: n(1536)}, "1.5 KiB", "not accounted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memoryText(&tt.r); got != tt.memory {
				t.Errorf("memoryText(%+v) = %q; want %q", tt.r, got, tt.memory)
			}
			if got := cpuText(&tt.r); got != tt.cpu {
				t.Errorf("cpuText(%+v) = %q; want %q", tt.r, got, tt.cpu)
			}
		})
	}
}
