package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/github"
)

// githubCheckName names the GitHub access check of a team.
func githubCheckName(team string) string { return "GitHub access of team " + team }

// usesGitHub reports whether team t talks to GitHub with its token, and
// what it needs of the token beyond what every such team does (push its
// issues' branches; open, label and merge their pull requests): a team
// whose tracker is the repository's issues (tracker = "github") needs
// them too; one whose reviews only are pull requests (review = "github")
// does not; one whose phases are a project's field (github.project) needs
// the project too. This is the one place doctor decides it.
func usesGitHub(t config.Team) (github.Needs, bool) {
	tracker := t.Tracker == config.TrackerGitHub
	return github.Needs{Issues: tracker, Project: tracker && t.GitHub.Project != 0}, tracker || t.Review == config.ReviewGitHub
}

// What a token needs, said for a person making one: a fine-grained
// token's permissions (and Projects read and write on the owner, for a
// team that names a project), a classic token's scopes.
const (
	fineGrainedNeeds       = "read and write access to Contents, Issues and Pull requests of the repository, and read access to its Metadata"
	classicNeeds           = "the repo scope"
	githubTokenPermissions = "fine-grained: " + fineGrainedNeeds + "; classic: " + classicNeeds
)

// checkGitHub: may the token of team t do on its repository what Legion
// does there? It reads the token as the team's controller does (the
// variable github.token_env of the user manager's environment w, else
// github.credentials_file), asks GitHub in one query (one point of the
// token's rate limit) and judges the answer by github.Access.Missing. A
// classic token's scopes are listed by GitHub; a fine-grained token's
// permissions are not, so then only its user's permission on the
// repository is judged, and the detail says what to give the token. The
// token is sent only to github.api_url and is never in the result.
func checkGitHub(ctx context.Context, configPath string, t config.Team, w workerEnv, needs github.Needs) Check {
	c := Check{Name: githubCheckName(t.Name), Team: t.Name}
	tokenEnv := cmp.Or(t.GitHub.TokenEnv, github.DefaultTokenEnv)
	endpoint := cmp.Or(t.GitHub.APIURL, github.DefaultEndpoint)
	tokens, err := github.WebURL(endpoint, github.TokensPath)
	if err != nil {
		c.Status, c.Detail = Fail, fmt.Sprintf("github.api_url: %v", err)
		c.Fix = "set github.api_url of team " + t.Name + " in " + configPath + " to GitHub's GraphQL endpoint, e.g. " + github.DefaultEndpoint
		return c
	}
	// where says where the controller reads the token, for a fix that
	// gives it a new one.
	where := fmt.Sprintf("put %s=... in a file of %s (then `systemctl --user daemon-reload`)", tokenEnv, w.environmentDir())
	if t.GitHub.CredentialsFile != "" {
		where += " or write it to " + t.GitHub.CredentialsFile + " (mode 0600)"
	}
	where += ", never on a command line"
	if w.err != nil && t.GitHub.CredentialsFile == "" {
		c.Status = Warn
		c.Detail = fmt.Sprintf("the user manager's environment, where the controller finds $%s, cannot be read: %v", tokenEnv, w.err)
		c.Fix = fmt.Sprintf("see the check %q", CheckManager)
		return c
	}
	owner, repo, _ := strings.Cut(t.GitHub.Repo, "/")
	client, err := github.New(github.Options{
		Owner: owner, Repo: repo,
		TokenEnv: tokenEnv, TokenFile: t.GitHub.CredentialsFile, Getenv: w.get,
		Endpoint: endpoint,
		Retry:    github.Retry{Attempts: 3, MaxWait: 5 * time.Second},
	})
	if err != nil {
		c.Status, c.Detail = Fail, fmt.Sprintf("%v: the controller looks in the user manager's environment, not in this shell's", err)
		c.Fix = fmt.Sprintf("create a token at %s (%s) and %s", tokens, githubTokenPermissions, where)
		return c
	}
	a, err := client.Access(ctx)
	var ae *github.APIError
	switch {
	case errors.Is(err, github.ErrAuth):
		c.Status, c.Detail = Fail, "token rejected: "+err.Error()
		c.Fix = fmt.Sprintf("the token is wrong, expired or revoked: create a new one at %s (%s) and %s", tokens, githubTokenPermissions, where)
		return c
	case errors.As(err, &ae) && ae.Type == "NOT_FOUND":
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = fmt.Sprintf("check github.repo of team %s in %s (owner/name as on GitHub); if it is right, give the token access: "+
			"a fine-grained token must list %s under Repository access, with the repository's owner as its resource owner; "+
			"a classic token needs the repo scope for a private repository", t.Name, configPath, t.GitHub.Repo)
		return c
	case errors.As(err, &ae):
		c.Status, c.Detail = Fail, "GitHub refuses: "+err.Error()
		c.Fix = fmt.Sprintf("do what GitHub says (an organization with SAML single sign-on wants the token authorized for it: Configure SSO beside the token at %s)", tokens)
		return c
	case errors.Is(err, github.ErrRateLimited):
		c.Status, c.Detail = Warn, "cannot ask GitHub now: "+err.Error()
		c.Fix = "wait until the token's rate limit is reset, then run `legion doctor` again; a token Legion shares with other programs shares its budget too"
		return c
	case err != nil:
		c.Status, c.Detail = Fail, "cannot ask GitHub: "+err.Error()
		c.Fix = fmt.Sprintf("check the network and github.api_url of team %s in %s (%s)", t.Name, configPath, endpoint)
		return c
	}

	who := fmt.Sprintf("%s, %s on %s", a.Login, cmp.Or(a.Permission, "no permission"), a.Repository)
	if lacks := a.Missing(needs); len(lacks) > 0 {
		var whats, fixes []string
		newToken := false
		for _, l := range lacks {
			whats = append(whats, l.What)
			if !slices.Contains(fixes, l.Fix) {
				fixes = append(fixes, l.Fix)
			}
			newToken = newToken || l.NewToken
		}
		if newToken {
			fixes = append(fixes, "then "+where)
		}
		c.Status, c.Detail, c.Fix = Fail, who+": "+strings.Join(whats, "; "), strings.Join(fixes, "; ")
		return c
	}
	fine := fineGrainedNeeds
	if needs.Project {
		fine += ", and read and write access to Projects of its owner"
	}
	token := "a fine-grained token (GitHub does not list its permissions; it needs " + fine + ")"
	if a.Classic() {
		token = "a classic token with " + strings.Join(a.Scopes, ", ")
	}
	rl := a.RateLimit
	budget := fmt.Sprintf("%d of %d points of its rate limit left until %s", rl.Remaining, rl.Limit, rl.ResetAt.Local().Format("15:04 MST"))
	c.Status, c.Detail = OK, who+"; "+token+"; "+budget
	if rl.Limit > 0 && rl.Remaining < rl.Limit/10 {
		c.Status = Warn
		c.Fix = "the token's rate limit is almost spent: a token Legion shares with other programs shares its budget; give Legion a token of its own"
	}
	return c
}
