package ptyworker

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/ptyworker/proto"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/units/sdtest"
)

// hookSamples is how many hook events each way BenchmarkHookToStateEvent
// times per iteration.
const hookSamples = 50

// BenchmarkHookToStateEvent: a hook event of Claude Code, from the start
// of `legion hook` (the real legion binary, as Claude Code runs it, with
// the payload on its stdin) to the state event a watcher of the worker
// receives; the same through RelayHook in this process (no process
// start); and as the baseline, a bare unix-socket round trip (dial, one
// byte each way). Medians, in ms (target: ≤100 ms per event), and the
// ratio of the hook path to the baseline.
func BenchmarkHookToStateEvent(b *testing.B) {
	legion := sdtest.LegionBinary(b)
	payloads := []struct {
		raw   string
		state api.AgentState
	}{
		{`{"hook_event_name":"UserPromptSubmit","prompt":"go"}`, api.AgentWorking},
		{`{"hook_event_name":"Stop","last_assistant_message":"done","background_tasks":[]}`, api.AgentIdle},
	}
	var process, inProcess, bare []time.Duration
	for range b.N {
		spec := testSpec(b, "sleep", "100000")
		spec.Agent = proto.AgentClaude
		tw := startWorker(b, spec, Options{Logger: discardLogger(), Notify: func(string) error { return nil }})
		cl := tw.dial()
		if _, err := cl.Watch(context.Background()); err != nil {
			b.Fatal(err)
		}
		env := hookEnv(b, cl)
		getenv := func(k string) string {
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, k+"="); ok {
					return v
				}
			}
			return ""
		}
		// seen waits for the state event of the agent in state st.
		seen := func(st api.AgentState) {
			for ev := range cl.Events() {
				if ev.Kind == proto.EventKindState && ev.State.Agent != nil && ev.State.Agent.State == st {
					return
				}
			}
			b.Fatal("the watch connection ended")
		}
		for i := range 2 * hookSamples {
			p := payloads[i%2]
			t0 := time.Now()
			cmd := exec.Command(legion, "hook")
			cmd.Env = env
			cmd.Stdin = strings.NewReader(p.raw)
			if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
				b.Fatalf("legion hook: %v: %s", err, out)
			}
			seen(p.state)
			process = append(process, time.Since(t0))
		}
		for i := range 2 * hookSamples {
			p := payloads[i%2]
			t0 := time.Now()
			if err := RelayHook(context.Background(), strings.NewReader(p.raw), &bytes.Buffer{}, getenv, kinds.HookDialect); err != nil {
				b.Fatal(err)
			}
			seen(p.state)
			inProcess = append(inProcess, time.Since(t0))
		}
		cl.Close()
		tw.cancel()
		tw.wait()
		bare = append(bare, benchreport.SocketRoundTrips(b, 2*hookSamples)...)
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	p, r, s := percentile(process, 0.5), percentile(inProcess, 0.5), percentile(bare, 0.5)
	b.ReportMetric(ms(p), "ms/legion-hook-event")
	b.ReportMetric(ms(percentile(process, 0.99)), "p99-ms/legion-hook-event")
	b.ReportMetric(ms(r), "ms/relay-event")
	b.ReportMetric(ms(s), "ms/socket-round-trip")
	b.ReportMetric(float64(p)/float64(s), "legion-hook/socket")
	b.ReportMetric(float64(r)/float64(s), "relay/socket")
	b.ReportMetric(0, "ns/op")
}

// hookEnv is this process's environment with the agent's hook socket and
// token: what `legion hook` sees when the agent runs it.
func hookEnv(b *testing.B, cl *proto.Client) []string {
	b.Helper()
	env := os.Environ()
	for kv := range strings.SplitSeq(agentEnviron(b, cl), "\x00") {
		if strings.HasPrefix(kv, proto.EnvHookSocket+"=") || strings.HasPrefix(kv, proto.EnvHookToken+"=") {
			env = append(env, kv)
		}
	}
	return env
}
