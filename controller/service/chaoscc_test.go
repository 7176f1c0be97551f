package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/linear/lineartest"
	"github.com/legion-dev/legion/internal/followmodel"
	"github.com/legion-dev/legion/units/unitname"
)

// The chaos run's second team, "cc": its agents are the real Claude Code
// CLI against the fake Anthropic API in follow mode (the model knows only
// what Claude Code sent it and follows the phase's instructions in the
// prompt, as in TestFollowClaude), its tracker a second fake Linear (team
// key CC). It is set up as the README's quick start sets up a team (`legion
// team add cc --workspace DIR --kind claude` with claude in the shell's
// PATH, the provider's address and key in the user manager's environment,
// `legion install --enable cc`) plus the README's two Linear lines;
// every other setting (stale_after, start limits, the policy) is
// legion.toml's default. It runs under its own legion@cc beside
// legion@demo, in the same user manager and state directory, so every
// fault that hits the helper, the state files or a worker hits it too;
// the model faults (model-stall, model-error) hit only it.
//
// A second team rather than a few Claude issues in demo's backlog: a
// team has one agent kind, and a user who runs Claude Code beside another
// agent does it so.

const (
	ccTeam     = "cc"
	ccIssues   = 2 // per backlog
	ccQuestion = "Question: which greeting should it use? (hello|hi)"
	ccAnswer   = "hi"
)

// chaosCC is the Claude team's state in a run.
type chaosCC struct {
	short string // the team's short id (its units' prefix)
	ws    string
	srv   *lineartest.Server
	api   *anthropictest.Server
	ids   []string
	// answered is, by issue, how many of Legion's escalations the test
	// answered as a person.
	answered map[string]int
	answers  int
	// stalls held a stream; released counts those the run let go on
	// (the others ended with the client going away).
	stalls []*anthropictest.Stall
	// hit are the requests a model fault answered, with what it was
	// (Match records them, in the fake's goroutines).
	mu  sync.Mutex
	hit []faultHit
}

// faultHit is a request of the model API that a fault answered.
type faultHit struct {
	what    string
	session string
	at      time.Time
}

// record returns a Match that records the request a fault answers.
func (cc *chaosCC) record(what string) func(*anthropictest.Request) bool {
	return func(q *anthropictest.Request) bool {
		cc.mu.Lock()
		cc.hit = append(cc.hit, faultHit{what, q.Session, q.Time})
		cc.mu.Unlock()
		return true
	}
}

// addClaudeTeam sets up team cc (see above). It must run before the
// controllers start.
func (r *chaosRun) addClaudeTeam(ctx context.Context) {
	t := r.t
	cli := claudetest.Binary(t)
	cc := &chaosCC{answered: map[string]int{}}
	r.cc = cc
	cc.srv = lineartest.NewServer(t, linearKey, "CC")
	keyFile := filepath.Join(t.TempDir(), "linear-key-cc")
	if err := os.WriteFile(keyFile, []byte(linearKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cc.api = anthropictest.NewServer(t)
	cc.api.Key = claudetest.Token
	cc.api.Follow(followmodel.Traits{})
	env := []string{"ANTHROPIC_BASE_URL=" + cc.api.URL, "ANTHROPIC_API_KEY=" + claudetest.Token}
	if out, err := r.sd.Systemctl(t, append([]string{"set-environment"}, env...)...); err != nil {
		t.Fatalf("systemctl --user set-environment: %v\n%s", err, out)
	}

	cc.ws = filepath.Join(r.sd.Home, "src", "cc")
	if err := os.MkdirAll(cc.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	r.git(cc.ws, "init", "-q", "-b", "main")
	r.git(cc.ws, "config", "user.name", "A User")
	r.git(cc.ws, "config", "user.email", "user@example.com")
	if err := os.WriteFile(filepath.Join(cc.ws, "README"), []byte("cc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.git(cc.ws, "add", "README")
	r.git(cc.ws, "commit", "-q", "-m", "first")

	t.Setenv("PATH", filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var added struct {
		ShortID string `json:"short_id"`
		Agent   string `json:"agent"`
	}
	if err := json.Unmarshal([]byte(r.legion(ctx, "team", "add", ccTeam, "--workspace", cc.ws, "--kind", "claude", "--json")), &added); err != nil {
		t.Fatalf("legion team add %s --json: %v", ccTeam, err)
	}
	if added.Agent != cli {
		t.Fatalf("legion team add: agent %q; want Claude Code found in PATH, %s", added.Agent, cli)
	}
	cc.short = added.ShortID
	// The README's Linear lines, appended to the table team add wrote
	// last.
	f, err := os.OpenFile(r.configPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "tracker = \"linear\"\n\n[teams.%s.linear]\nteam_key = \"CC\"\ncredentials_file = %q\napi_url = %q\n", ccTeam, keyFile, cc.srv.URL)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The units' output to the run's log (the private manager has no
	// journal), as for legion@demo.
	ctl, _ := unitname.ControllerUnit(ccTeam)
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	r.dropIn(filepath.Join(unitDir, ctl+".d", "90-test.conf"), fmt.Sprintf("[Service]\nStandardOutput=append:%s\nStandardError=append:%s\n", r.logFile, r.logFile))
	r.legionAll(ctx, "install", "--enable", ccTeam)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, q := range cc.api.MessageRequests("") {
			t.Logf("API request %s session %s: last user text %q%s", q.Time.Format("15:04:05.000"), q.Session, clip(q.LastUserText(), 200), toolResults(q))
		}
	})
}

// addClaudeIssues adds n issues to team cc; the first of each backlog
// holds a question for a person in a comment, which the planner asks.
func (r *chaosRun) addClaudeIssues(n int) {
	for i := range n {
		is := r.cc.srv.AddIssue(fmt.Sprintf("Greet the user %d", len(r.cc.ids)+1), "Todo")
		if i == 0 {
			r.cc.srv.Comment(is, "Grace Hopper", ccQuestion)
		}
		r.cc.ids = append(r.cc.ids, is.Identifier)
	}
}

// ccIssue reads an issue of team cc from its fake.
func (r *chaosRun) ccIssue(id string) (controller.TrackedIssue, error) {
	is := r.cc.srv.Issue(id)
	if is == nil {
		return controller.TrackedIssue{}, fmt.Errorf("fake Linear CC has no issue %s", id)
	}
	return controller.TrackedIssue{ID: is.Identifier, Title: is.Title,
		Status: linearStatuses[r.cc.srv.StateName(is.StateID)], Labels: r.cc.srv.LabelNames(is)}, nil
}

// ccEscalations are how many of Legion's comments on issue is of team cc
// are not an agent's report (linearEscalations).
func (r *chaosRun) ccEscalations(is *lineartest.Issue) int {
	return len(linearEscalations(r.cc.srv, is))
}

// linearEscalations are the texts of Legion's comments on issue is of the
// fake Linear srv that are not an agent's report: on Linear both are
// signed by the key's user.
func linearEscalations(srv *lineartest.Server, is *lineartest.Issue) []string {
	var out []string
	srv.Lock()
	defer srv.Unlock()
	for _, c := range is.Comments {
		if c.User != srv.UserName {
			continue
		}
		report := false
		for _, p := range []string{"Plan: ", "Implemented: ", "Review: ", "Retro: "} {
			report = report || strings.HasPrefix(c.Body, p)
		}
		if !report {
			out = append(out, c.Body)
		}
	}
	return out
}

// answerClaude answers, as a person would in Linear, every new wait of
// team cc: "Answer: hi" (what the instruction-following model reads as the
// answer to the question it asked; after an API error it goes on with its
// steps) and user-feedback-given. A wait is a new escalation comment of
// Legion's, so a poll between the controller's two label removals does
// not answer the same wait twice. An issue whose finisher ended without
// closing it is finished with `legion worktree finish`, as the
// escalation says (as demo's person does: an answer would be taken as
// read and the escalation repeated, for ever; the first 30-minute run
// with the Claude team answered CC-2's so 43 times).
func (r *chaosRun) answerClaude() {
	if r.cc == nil {
		return
	}
	fb := r.cc.srv.AddLabel(controller.LabelFeedbackGiven, r.cc.srv.TeamID)
	for _, id := range r.cc.ids {
		is := r.cc.srv.Issue(id)
		labels := r.cc.srv.LabelNames(is)
		if !slices.Contains(labels, controller.LabelInputNeeded) || slices.Contains(labels, controller.LabelFeedbackGiven) {
			continue
		}
		if r.stopHeld(id, lastLinear(r.cc.srv, is)) {
			r.cc.srv.RemoveLabel(is, controller.LabelInputNeeded)
			continue
		}
		if slices.Contains(labels, controller.LabelFinishing) {
			// Its error (a fault meeting it) is the next call's to retry.
			out, err := r.finishByHand(ccTeam, id)
			r.finishedByHand++
			r.t.Logf("chaos: finished %s by hand as a person (Claude team; its finisher ended without closing it): %v %s", id, err, strings.TrimSpace(string(out)))
			continue
		}
		n := r.ccEscalations(is)
		if n <= r.cc.answered[id] {
			continue
		}
		r.cc.answered[id] = n
		r.cc.srv.Comment(is, "Grace Hopper", "Answer: "+ccAnswer)
		r.cc.srv.Lock()
		is.LabelIDs = append(is.LabelIDs, fb.ID)
		r.cc.srv.Unlock()
		r.cc.answers++
		r.t.Logf("chaos: answered %s as a person (Claude team, answer %d)", id, r.cc.answers)
	}
}

// A model fault is queued for the next request of team cc's agents; at
// most two wait at once (a fault with no request to meet counts as
// picked with no target).

// injectModelStall makes the fake API hold the next message of team
// cc's agents mid-stream (after message_start, the first block's start,
// a ping and a delta: F7a), the message the follow model decided. The
// run releases it after 2–20 s (a slow API that recovers); in a long
// run one stall in four is never released, so Claude Code's own stream
// timeout (5 min, F7b) or Legion's watchdog must recover it.
func (r *chaosRun) injectModelStall(ctx context.Context, long bool) bool {
	if r.cc == nil || r.cc.api.Pending(anthropictest.AnySession) > 1 {
		return false
	}
	st := anthropictest.NewStall(2 + r.in.IntN(3))
	hold := r.in.Between(2*time.Second, 20*time.Second)
	never := long && r.in.IntN(4) == 0
	r.cc.stalls = append(r.cc.stalls, st)
	r.cc.api.Script(anthropictest.AnySession, anthropictest.Turn{Follow: true, Stall: st, Match: r.cc.record("stall")})
	if never {
		r.t.Logf("chaos: the model API holds the next stream after %d events, not released", st.After)
		return true
	}
	r.t.Logf("chaos: the model API holds the next stream after %d events for %s", st.After, hold)
	go func() {
		select {
		case <-st.Stalled():
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(hold):
			st.Release()
		case <-st.Gone():
		case <-ctx.Done():
		}
	}()
	return true
}

// injectModelError makes the fake API fail the next 1–3 requests of team
// cc's agents: 529 overloaded_error or 500 api_error as HTTP answers, or
// an overloaded_error event in the stream after message_start.
func (r *chaosRun) injectModelError() bool {
	if r.cc == nil || r.cc.api.Pending(anthropictest.AnySession) > 1 {
		return false
	}
	n := 1 + r.in.IntN(3)
	turn := anthropictest.Turn{Follow: true, Repeat: n - 1}
	var what string
	switch r.in.IntN(3) {
	case 0:
		turn.Failure, what = anthropictest.Overloaded(), "529 overloaded_error"
	case 1:
		turn.Failure = &anthropictest.Failure{Status: 500, Error: anthropictest.APIError{Type: "api_error", Message: "Internal server error"}}
		what = "500 api_error"
	default:
		turn.StreamError, what = &anthropictest.APIError{Type: "overloaded_error", Message: "Overloaded"}, "an overloaded_error event mid-stream"
	}
	turn.Match = r.cc.record(what)
	r.cc.api.Script(anthropictest.AnySession, turn)
	r.t.Logf("chaos: the model API answers the next %d requests with %s", n, what)
	return true
}

// endModelFaults drops the model faults not yet met and lets every held
// stream go on: the faults stop.
func (r *chaosRun) endModelFaults() {
	if r.cc == nil {
		return
	}
	r.cc.api.Clear(anthropictest.AnySession)
	for _, st := range r.cc.stalls {
		st.Release()
	}
}

// checkClaude: every issue of team cc went through its phases once, as
// the tracker and git show it: one plan, two reviews (the strict
// reviewer asks for changes once, then approves), one retro, the retro's
// commit merged into main; every escalation answered; no comment written
// twice in a row.
func (r *chaosRun) checkClaude() {
	if r.cc == nil {
		return
	}
	t := r.t
	mainLog := r.git(r.cc.ws, "log", "--format=%s", "main")
	for _, id := range r.cc.ids {
		is := r.cc.srv.Issue(id)
		count := map[string]int{}
		r.cc.srv.Lock()
		for i, c := range is.Comments {
			for _, p := range []string{"Plan: ", "Review: ", "Retro: "} {
				if c.User == r.cc.srv.UserName && strings.HasPrefix(c.Body, p) {
					count[p]++
				}
			}
			if i > 0 && c.User == r.cc.srv.UserName && c.Body == is.Comments[i-1].Body && c.User == is.Comments[i-1].User {
				t.Errorf("%s: comment %d repeats comment %d; want each written once:\n%s", id, i+1, i, c.Body)
			}
		}
		r.cc.srv.Unlock()
		for p, want := range map[string]int{"Plan: ": 1, "Review: ": 2, "Retro: ": 1} {
			if count[p] != want {
				t.Errorf("%s (Claude team): %d %q comments; want %d (each phase run to completion once)", id, count[p], p, want)
			}
		}
		if !strings.Contains(mainLog, id+": retro:") {
			t.Errorf("%s (Claude team): main's log has no retro commit (the branch was not merged):\n%s", id, mainLog)
		}
		n := r.ccEscalations(is)
		t.Logf("%s (Claude team): %d escalations, %d answered", id, n, r.cc.answered[id])
		if slices.ContainsFunc(is.Comments, func(c lineartest.Comment) bool { return c.Body == ccQuestion }) && n == 0 {
			t.Errorf("%s (Claude team): the planner's question was never escalated", id)
		}
	}
	stalled, gone := 0, 0
	for _, st := range r.cc.stalls {
		select {
		case <-st.Stalled():
			stalled++
		default:
		}
		select {
		case <-st.Gone():
			gone++
		default:
		}
	}
	reqs := r.cc.api.MessageRequests("")
	// What Claude Code did after each model fault: the next request of
	// the same session, and how long after (a retry of its own, or a
	// resume after Legion's watchdog or a person's answer).
	r.cc.mu.Lock()
	for _, h := range r.cc.hit {
		next := "no later request of its session"
		for _, q := range reqs {
			if q.Session == h.session && q.Time.After(h.at) {
				next = fmt.Sprintf("its session's next request %s later", q.Time.Sub(h.at).Round(100*time.Millisecond))
				break
			}
		}
		t.Logf("Claude team: %s at %s (session %s): %s", h.what, h.at.Format("15:04:05.000"), h.session, next)
	}
	r.cc.mu.Unlock()
	t.Logf("Claude team: %d issues, %d model requests; %d stalls injected, %d held a stream, %d of them ended by the client going away; %d waits answered",
		len(r.cc.ids), len(reqs), len(r.cc.stalls), stalled, gone, r.cc.answers)
}
