package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/github/githubtest"
)

const (
	ghToken = "ghp_DOCTORTESTTOKEN0123456789"
	ghEnv   = "LEGION_TEST_DOCTOR_GITHUB_TOKEN"
)

// TestGitHubAccess: a GitHub team's token, read from the user manager's
// environment (or the credentials file) as the controller reads it, is
// asked of the fake GitHub what it may do on the repository; what it
// lacks fails, named, with how to get it; the token is never shown.
func TestGitHubAccess(t *testing.T) {
	srv := githubtest.NewServer(t, ghToken, "legion-dev", "demo")
	tokens := srv.URL + "/settings/tokens"
	team := func(mod func(*config.Team)) config.Team {
		tm := config.Team{Name: "demo", Review: config.ReviewGitHub,
			GitHub: config.GitHub{Repo: "legion-dev/demo", TokenEnv: ghEnv, APIURL: srv.URL}}
		if mod != nil {
			mod(&tm)
		}
		return tm
	}
	home := t.TempDir()
	withToken := workerEnv{env: []string{"HOME=" + home, ghEnv + "=" + ghToken}}
	envDir := filepath.Join(home, ".config", "environment.d")
	tokenFile := filepath.Join(t.TempDir(), "github-token")
	if err := os.WriteFile(tokenFile, []byte(ghToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name         string
		access       githubtest.Access
		team         config.Team
		needs        github.Needs // besides usesGitHub's: a GitHub tracker's
		env          workerEnv
		status       Status
		detail, fix  string
		alsoInDetail string
		alsoInFix    string
	}{
		{name: "fine-grained token with write", env: withToken, team: team(nil), status: OK,
			detail:       "legion-bot, WRITE on legion-dev/demo; a fine-grained token (GitHub does not list its permissions; it needs read and write access to Contents, Issues and Pull requests",
			alsoInDetail: "4999 of 5000 points of its rate limit left until "},
		{name: "classic token with repo", access: githubtest.Access{Login: "alice", Permission: "ADMIN", Private: true, Scopes: []string{"repo", "read:org"}},
			env: withToken, team: team(nil), status: OK,
			detail: "alice, ADMIN on legion-dev/demo; a classic token with repo, read:org; "},
		{name: "read permission, tracker", access: githubtest.Access{Permission: "READ"}, env: withToken,
			team: team(func(t *config.Team) { t.Tracker = config.TrackerGitHub }), status: Fail,
			detail: "legion-bot has READ permission on legion-dev/demo; Legion needs WRITE (push branches; open, label and merge pull requests; label, comment on and close issues)",
			fix:    "give legion-bot write access to legion-dev/demo"},
		{name: "read permission", access: githubtest.Access{Permission: "READ"}, env: withToken, team: team(nil), status: Fail,
			detail: "legion-bot, READ on legion-dev/demo: legion-bot has READ permission on legion-dev/demo; Legion needs WRITE",
			fix:    "give legion-bot write access to legion-dev/demo (Settings → Collaborators and teams), or use a token of a user who has it"},
		{name: "classic token without the repo scope", access: githubtest.Access{Scopes: []string{"read:org"}}, env: withToken, team: team(nil), status: Fail,
			detail:    "the token lacks the repo scope (public_repo would do for the public legion-dev/demo; its scopes: read:org)",
			fix:       "create a classic token with the repo scope at " + tokens,
			alsoInFix: "then put " + ghEnv + "=... in a file of " + envDir + " (then `systemctl --user daemon-reload`), never on a command line"},
		{name: "private repository, classic token without the repo scope", access: githubtest.Access{Private: true, Scopes: []string{"public_repo"}},
			env: withToken, team: team(nil), status: Fail,
			detail: "access to legion-dev/demo: the repository is not found or not visible to this token (the token's scopes: public_repo; a private repository needs repo)",
			fix:    "a classic token needs the repo scope for a private repository"},
		{name: "tracker on issues that are disabled", access: githubtest.Access{IssuesDisabled: true},
			env: withToken, team: team(func(t *config.Team) { t.Tracker = config.TrackerGitHub }), status: Fail,
			detail: "legion-bot, WRITE on legion-dev/demo: issues are disabled on legion-dev/demo, and they are the team's backlog",
			fix:    "enable Issues in the Settings of legion-dev/demo (General → Features)"},
		{name: "project, classic token without the project scope", access: githubtest.Access{Scopes: []string{"repo"}}, needs: github.Needs{Project: true},
			env: withToken, team: team(nil), status: Fail,
			detail: "the token lacks the project scope, which setting the project's Status field needs (its scopes: repo)",
			fix:    "create a classic token with the repo and project scopes at " + tokens, alsoInFix: "then put " + ghEnv + "=..."},
		{name: "project, fine-grained token", needs: github.Needs{Project: true}, env: withToken, team: team(nil), status: OK,
			detail: "Metadata, and read and write access to Projects of its owner)"},
		{name: "unknown repository", env: withToken, team: team(func(t *config.Team) { t.GitHub.Repo = "legion-dev/nope" }), status: Fail,
			detail: "access to legion-dev/nope: the repository is not found or not visible to this token",
			fix:    "check github.repo of team demo in /cfg/legion.toml (owner/name as on GitHub)", alsoInFix: "a fine-grained token must list legion-dev/nope under Repository access"},
		{name: "token rejected", env: workerEnv{env: []string{"HOME=" + home, ghEnv + "=ghp_revoked"}}, team: team(nil), status: Fail,
			detail: "token rejected: access to legion-dev/demo: github: authentication failed: check the token in $" + ghEnv + " (GitHub says: Bad credentials)",
			fix:    "the token is wrong, expired or revoked: create a new one at " + tokens, alsoInFix: "put " + ghEnv + "=... in a file of " + envDir},
		{name: "no token in the manager's environment", env: workerEnv{env: []string{"HOME=" + home}}, team: team(nil), status: Fail,
			detail: "github: no token: set $" + ghEnv + " or configure a token file: the controller looks in the user manager's environment, not in this shell's",
			fix:    "create a token at " + tokens + " (fine-grained: read and write access to Contents, Issues and Pull requests"},
		{name: "token in the credentials file", env: workerEnv{env: []string{"HOME=" + home}}, team: team(func(t *config.Team) { t.GitHub.CredentialsFile = tokenFile }),
			status: OK, detail: "legion-bot, WRITE on legion-dev/demo"},
		{name: "credentials file, manager unreadable", env: workerEnv{err: errors.New("no bus")}, team: team(func(t *config.Team) { t.GitHub.CredentialsFile = tokenFile }),
			status: OK, detail: "legion-bot, WRITE on legion-dev/demo"},
		{name: "manager unreadable", env: workerEnv{err: errors.New("no bus")}, team: team(nil), status: Warn,
			detail: "the user manager's environment, where the controller finds $" + ghEnv + ", cannot be read: no bus", fix: `see the check "systemd user manager"`},
		{name: "rate limit almost spent", access: githubtest.Access{Limit: 5000, Remaining: 120}, env: withToken, team: team(nil), status: Warn,
			detail: "120 of 5000 points of its rate limit left", fix: "give Legion a token of its own"},
		{name: "not a URL", env: withToken, team: team(func(t *config.Team) { t.GitHub.APIURL = "::" }), status: Fail,
			detail: "github.api_url: github: the endpoint \"::\" is not a URL", fix: "set github.api_url of team demo in /cfg/legion.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(ghEnv, "") // the process's own environment is not the controller's
			srv.SetAccess(tc.access)
			needs, _ := usesGitHub(tc.team)
			needs.Issues = needs.Issues || tc.needs.Issues
			needs.Project = needs.Project || tc.needs.Project
			c := checkGitHub(t.Context(), "/cfg/legion.toml", tc.team, tc.env, needs)
			t.Logf("%s: %s\n  fix: %s", c.Status, c.Detail, c.Fix)
			expect(t, c, tc.status, tc.detail, tc.fix)
			if !strings.Contains(c.Detail, tc.alsoInDetail) || !strings.Contains(c.Fix, tc.alsoInFix) {
				t.Errorf("check %q: detail %q, fix %q; want them to contain %q and %q", c.Name, c.Detail, c.Fix, tc.alsoInDetail, tc.alsoInFix)
			}
			if c.Name != "GitHub access of team demo" || c.Team != "demo" {
				t.Errorf("check named %q of team %q; want \"GitHub access of team demo\" of team demo", c.Name, c.Team)
			}
			if strings.Contains(c.Detail+c.Fix, ghToken) {
				t.Errorf("check %q shows the token: %+v", c.Name, c)
			}
		})
	}
}

// TestGitHubAccessNotFromProcess: the token in legion doctor's own
// environment but not in the user manager's is no token for the
// controller, and doctor says so.
func TestGitHubAccessNotFromProcess(t *testing.T) {
	srv := githubtest.NewServer(t, ghToken, "legion-dev", "demo")
	t.Setenv(ghEnv, ghToken)
	tm := config.Team{Name: "demo", Review: config.ReviewGitHub, GitHub: config.GitHub{Repo: "legion-dev/demo", TokenEnv: ghEnv, APIURL: srv.URL}}
	needs, _ := usesGitHub(tm)
	c := checkGitHub(t.Context(), "/cfg/legion.toml", tm, workerEnv{env: []string{"HOME=/home/alice"}}, needs)
	expect(t, c, Fail, "github: no token: set $"+ghEnv, "put "+ghEnv+"=... in a file of /home/alice/.config/environment.d")
	if n := srv.Calls(""); n != 0 {
		t.Errorf("requests to GitHub = %d; want none without a token", n)
	}
}

// TestUsesGitHub: which teams get the check.
func TestUsesGitHub(t *testing.T) {
	for _, tc := range []struct {
		team  config.Team
		needs github.Needs
		uses  bool
	}{
		{config.Team{Name: "reviews", Tracker: config.TrackerLocal, Review: config.ReviewGitHub}, github.Needs{}, true},
		{config.Team{Name: "tracker", Tracker: config.TrackerGitHub, Review: config.ReviewGitHub}, github.Needs{Issues: true}, true},
		{config.Team{Name: "project", Tracker: config.TrackerGitHub, Review: config.ReviewGitHub, GitHub: config.GitHub{Project: 3}}, github.Needs{Issues: true, Project: true}, true},
		{config.Team{Name: "tracker, local reviews", Tracker: config.TrackerGitHub, Review: config.ReviewLocal}, github.Needs{Issues: true}, true},
		{config.Team{Name: "linear", Tracker: config.TrackerLinear, Review: config.ReviewLocal}, github.Needs{}, false},
		{config.Team{Name: "local"}, github.Needs{}, false},
	} {
		if needs, uses := usesGitHub(tc.team); uses != tc.uses || needs != tc.needs {
			t.Errorf("usesGitHub(team %s: tracker %q, review %q) = %+v, %v; want %+v, %v",
				tc.team.Name, tc.team.Tracker, tc.team.Review, needs, uses, tc.needs, tc.uses)
		}
	}
}
