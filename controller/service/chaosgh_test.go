package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/github/githubtest"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/units/unitname"
)

// The chaos run's third team, "gh" (CHAOS_GITHUB=0 leaves it out): its tracker and its
// reviews are a GitHub repository's (the local fake of GitHub's GraphQL
// API, its REST lists and git's smart HTTP: githubtest), its agent the
// scripted agent of demo, whose implementer has Legion open the pull
// request (`legion issue pr`), whose reviewer approves it with a label on
// it, and whose finisher has Legion merge it on GitHub. It is set up as
// the README's "A team on GitHub" says (`legion team add gh --workspace DIR
// --github acme/web`, the token in github.credentials_file, `legion
// install --enable gh`), with github.api_url naming the fake and demo's
// agent, limits and fast tick (the test's drop-in). It runs under its own
// legion@gh beside legion@demo, so every fault that hits the helper, the
// state files or a worker hits it too; the GitHub faults (github-5xx,
// github-429, github-timeout, github-lost-answer) hit only it.

const (
	ghTeam     = "gh"
	ghIssues   = 5 // per backlog: enough to meet the faults while demo's run
	ghToken    = "ghp_CHAOS0123456789abcdef"
	ghOwner    = "acme"
	ghRepoName = "web"
)

// chaosGH is the GitHub team's state in a run.
type chaosGH struct {
	short string // the team's short id (its units' prefix)
	ws    string
	bare  string // the fake's repository (ServeGit)
	srv   *githubtest.Server
	tr    *github.Tracker // for its identifiers only: its requests would meet the faults
	ids   []string
}

// addGitHubTeam sets up team gh (see above). It must run before the
// controllers start.
func (r *chaosRun) addGitHubTeam(ctx context.Context) {
	t := r.t
	gh := &chaosGH{}
	r.gh = gh
	gh.srv = githubtest.NewServer(t, ghToken, ghOwner, ghRepoName)
	gh.ws = filepath.Join(r.sd.Home, "src", "web")
	if err := os.MkdirAll(gh.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	r.git(gh.ws, "init", "-q", "-b", "main")
	r.git(gh.ws, "config", "user.name", "A User")
	r.git(gh.ws, "config", "user.email", "user@example.com")
	if err := os.WriteFile(filepath.Join(gh.ws, "README"), []byte("web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.git(gh.ws, "add", "README")
	r.git(gh.ws, "commit", "-q", "-m", "first")
	gh.bare = gh.srv.ServeGit(t, gh.ws)
	tokenFile := filepath.Join(filepath.Dir(r.configPath), "github-token")
	if err := os.WriteFile(tokenFile, []byte(ghToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var added struct {
		ShortID string `json:"short_id"`
	}
	if err := json.Unmarshal([]byte(r.legion(ctx, "team", "add", ghTeam, "--workspace", gh.ws, "--github", ghOwner+"/"+ghRepoName, "--json")), &added); err != nil {
		t.Fatalf("legion team add %s --json: %v", ghTeam, err)
	}
	gh.short = added.ShortID
	b, err := os.ReadFile(r.configPath)
	if err != nil {
		t.Fatal(err)
	}
	// gh's table is the file's last (team add appends it): demo's
	// scripted agent there instead of the Claude Code team add found in
	// PATH, if it did; the README's token line; demo's limits, so that
	// the injector's start limits hold for gh's units too.
	head, table, ok := strings.Cut(string(b), "\n[teams."+ghTeam+"]\n")
	if !ok {
		t.Fatalf("%s has no table [teams.%s] after team add:\n%s", r.configPath, ghTeam, b)
	}
	table = regexp.MustCompile(`(?m)^agent\.(new|resume) = .*\n`).ReplaceAllString(table, "")
	agent := fmt.Sprintf(`"/usr/bin/env", "LEGION_SCRIPT_FILE=%s", "%s", "scripted-agent"`, filepath.Join(r.sd.Home, "agent.script"), r.bin)
	cfg := head + "\n[teams." + ghTeam + "]\n" + table + fmt.Sprintf(`github.credentials_file = %q
github.api_url = %q
agent.new = [%s, "--session-id", "{session_id}", "{prompt}"]
agent.resume = [%s, "--resume", "{session_id}", "{prompt}"]
wip_limit = 3
stale_after = "20s"
restart_cooldown = "1s"
start_limit_burst = 20
start_limit_interval = "10m"
`, tokenFile, gh.srv.URL+"/graphql", agent, agent)
	if strings.Contains(head, `agent.permissions = "allowlist"`) {
		cfg += "agent.permissions = \"allowlist\"\n" // as demo's: its logs are outside the worktree
	}
	if err := os.WriteFile(r.configPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Load(r.configPath)
	if err != nil {
		t.Fatalf("legion.toml with team %s: %v\n%s", ghTeam, err, cfg)
	}
	ct, _ := loaded.Team(ghTeam)
	stateDir, err := config.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := team.Open(ct, loaded.Path, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := tm.Tracker.(*github.Tracker)
	if !ok {
		t.Fatalf("team add --github made a team with tracker %T; want GitHub's", tm.Tracker)
	}
	gh.tr = tr
	ctl, _ := unitname.ControllerUnit(ghTeam)
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	r.dropIn(filepath.Join(unitDir, ctl+".d", "90-test.conf"), fmt.Sprintf("[Service]\nExecStart=\nExecStart=%s controller --interval 1s %%i\nStandardOutput=append:%s\nStandardError=append:%s\n", r.bin, r.logFile, r.logFile))
	r.legionAll(ctx, "install", "--enable", ghTeam)
}

// addGitHubIssues adds n issues labelled legion to team gh's repository.
func (r *chaosRun) addGitHubIssues(n int) {
	for range n {
		num := r.gh.srv.AddIssue(fmt.Sprintf("Chaos issue %d on GitHub", len(r.gh.ids)+1), "legion")
		r.gh.ids = append(r.gh.ids, r.gh.tr.ID(num))
	}
}

// ghStatuses are the status labels of a team on GitHub, as Legion's.
var ghStatuses = map[string]controller.Status{
	"legion:in-progress": controller.StatusInProgress, "legion:needs-review": controller.StatusNeedsReview, "legion:retro": controller.StatusRetro,
}

// ghIssue reads an issue of team gh from its fake (not through the API,
// where the test's reads would meet the faults meant for Legion).
func (r *chaosRun) ghIssue(id string) (controller.TrackedIssue, error) {
	n, err := r.gh.tr.Number(id)
	if err != nil {
		return controller.TrackedIssue{}, err
	}
	is, ok := r.gh.srv.Issue(n)
	if !ok {
		return controller.TrackedIssue{}, fmt.Errorf("fake GitHub has no issue #%d (%s)", n, id)
	}
	out := controller.TrackedIssue{ID: id, Title: is.Title, Status: controller.StatusTodo}
	for _, l := range is.Labels {
		if s, ok := ghStatuses[l.Name]; ok {
			out.Status = s
		} else if l.Name != "legion" && !strings.HasPrefix(l.Name, "legion:") {
			out.Labels = append(out.Labels, l.Name)
		}
	}
	if is.State == "CLOSED" {
		out.Status = controller.StatusDone
	}
	return out, nil
}

// answerGitHub acts, as a person would on GitHub, on every issue of team
// gh that waits for one (its agents ask nothing, but a fault may leave
// an issue escalated): one whose finisher ended without closing it is
// finished with `legion worktree finish`, as the escalation says; any
// other gets a comment "Go on" and the label user-feedback-given.
func (r *chaosRun) answerGitHub() {
	if r.gh == nil {
		return
	}
	s := r.gh.srv
	for _, id := range r.gh.ids {
		n, _ := r.gh.tr.Number(id)
		labels := s.IssueLabels(n)
		if !slices.Contains(labels, controller.LabelInputNeeded) || slices.Contains(labels, controller.LabelFeedbackGiven) {
			continue
		}
		if is, _ := s.Issue(n); r.stopHeld(id, lastGitHub(is)) {
			s.SetLabels(n, slices.DeleteFunc(labels, func(l string) bool { return l == controller.LabelInputNeeded })...)
			continue
		}
		if slices.Contains(labels, controller.LabelFinishing) {
			out, err := r.finishByHand(ghTeam, id)
			r.finishedByHand++
			r.t.Logf("chaos: finished %s by hand as a person (its finisher ended without closing it): %v %s", id, err, strings.TrimSpace(string(out)))
			continue
		}
		s.Comment(n, "ana", "OWNER", "Go on")
		s.SetLabels(n, append(labels, controller.LabelFeedbackGiven)...)
		r.answers++
		r.t.Logf("chaos: answered %s on GitHub as a person (answer %d)", id, r.answers)
	}
}

// lastGitHub is the body of Legion's newest comment on is, "" when none.
func lastGitHub(is githubtest.Issue) string {
	for i := len(is.Comments) - 1; i >= 0; i-- {
		if c := is.Comments[i]; c.Author == githubtest.Viewer {
			return c.Body
		}
	}
	return ""
}

// injectGitHub injects one of the GitHub faults (kind github-...).
func (r *chaosRun) injectGitHub(kind string) bool {
	if r.gh == nil {
		return false
	}
	t, s := r.t, r.gh.srv
	switch kind {
	case "github-5xx":
		n := 1 + r.in.IntN(3)
		status := []int{http.StatusBadGateway, http.StatusServiceUnavailable}[r.in.IntN(2)]
		for range n {
			s.Inject(githubtest.ServerError(status))
		}
		t.Logf("chaos: GitHub answers the next %d requests with %d", n, status)
	case "github-429":
		secondary := r.in.IntN(2) == 0
		status := []int{http.StatusForbidden, http.StatusTooManyRequests}[r.in.IntN(2)]
		s.Inject(githubtest.RateLimitReply(status, secondary, time.Second, time.Now()))
		t.Logf("chaos: GitHub refuses the next request with %d over its rate limit (secondary: %v)", status, secondary)
	case "github-timeout":
		carry := r.in.IntN(2) == 0
		s.Stall(carry)
		t.Logf("chaos: GitHub holds the next request until the client times out (carried out first: %v)", carry)
	case "github-lost-answer":
		n := 1 + r.in.IntN(2)
		s.LoseAnswers(n)
		t.Logf("chaos: GitHub carries out the next %d writes and loses their answers", n)
	default:
		return false
	}
	return true
}

// checkGitHub: every issue of team gh Done (closed as completed) with its
// pull request merged and its file on GitHub's main; no comment of
// Legion's written twice in a row and the planner's once at most; no
// label written again after a write of it whose answer arrived. The
// phases and the runs are checked with demo's (checkPhases, checkRuns).
func (r *chaosRun) checkGitHub() {
	if r.gh == nil {
		return
	}
	t, s := r.t, r.gh.srv
	for _, id := range r.gh.ids {
		n, _ := r.gh.tr.Number(id)
		is, _ := s.Issue(n)
		if is.State != "CLOSED" || is.StateReason != "COMPLETED" {
			t.Errorf("%s (GitHub team): issue #%d is %s (%s); want closed as completed", id, n, is.State, is.StateReason)
		}
		plans := 0
		for i, c := range is.Comments {
			if c.Author != githubtest.Viewer {
				continue
			}
			if strings.HasPrefix(c.Body, "plan of "+id) {
				plans++
			} else {
				// An escalation: why a person was needed.
				t.Logf("%s (GitHub team): Legion's comment %d: %s", id, i+1, clip(c.Body, 300))
			}
			if i > 0 && c.Body == is.Comments[i-1].Body && c.Author == is.Comments[i-1].Author {
				t.Errorf("%s (GitHub team): comment %d repeats comment %d; want each written once:\n%s", id, i+1, i, c.Body)
			}
		}
		if plans > 1 {
			t.Errorf("%s (GitHub team): the plan's comment posted %d times; want once (a once-step)", id, plans)
		}
		if pr, ok := s.PR("legion/" + id); !ok || pr.State != "MERGED" {
			t.Errorf("%s (GitHub team): its pull request %+v (found %v); want it merged", id, pr, ok)
		}
		if out, err := exec.Command("git", "--git-dir", r.gh.bare, "show", "main:"+id+".txt").CombinedOutput(); err != nil || !strings.Contains(string(out), "impl "+id) {
			t.Errorf("GitHub's main:%s.txt = %q, %v; want the implementer's line", id, out, err)
		}
	}
	// Each write that took effect, by operation. A comment written on an
	// issue again right after the same one, whose answer arrived, or a
	// label created again after its creation was answered, is a write
	// the client did not know it had made.
	lost, byOp := map[string]int{}, map[string]int{}
	type key struct{ op, id string }
	type prev struct {
		what     string
		answered bool
	}
	last := map[key]prev{}
	for _, w := range s.Writes() {
		byOp[w.Op]++
		if w.Lost {
			lost[w.Op]++
		}
		k, what := key{w.Op, ""}, ""
		switch w.Op {
		case "LegionComment":
			k.id, _ = w.Variables["id"].(string)
			what, _ = w.Variables["body"].(string)
		case "LegionCreateLabel":
			what, _ = w.Variables["name"].(string)
			k.id = what
		default:
			continue
		}
		if p, seen := last[k]; seen && p.what == what && p.answered {
			t.Errorf("GitHub team: %s %q on %s written again after the same write was answered; want each written once", w.Op, clip(what, 80), k.id)
		}
		last[k] = prev{what, !w.Lost}
	}
	replies, stalls, lose := s.Pending()
	t.Logf("GitHub team: %d issues; writes by operation %v, their answers lost %v; faults not met (the backlog done first): %d replies (5xx, 429), %d stalls, %d lost answers",
		len(r.gh.ids), byOp, lost, replies, stalls, lose)
}
