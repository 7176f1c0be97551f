package github

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestOpenPullRequest: the first call opens the branch's pull request with
// the title, body and base given; a second (a resumed implementer, a
// retried command) finds it and opens none.
func TestOpenPullRequest(t *testing.T) {
	c, srv := newTest(t, nil)
	pr, created, err := c.OpenPullRequest(t.Context(), "DEMO-1", "main", "DEMO-1: greet", "Adds a greeting.")
	if err != nil || !created {
		t.Fatalf("OpenPullRequest = %+v, %v, %v; want a new pull request", pr, created, err)
	}
	got, ok := srv.PR("legion/DEMO-1")
	if !ok || got.Base != "main" || got.Title != "DEMO-1: greet" || got.Body != "Adds a greeting." || got.State != "OPEN" {
		t.Errorf("the server has %+v; want an open pull request of legion/DEMO-1 into main with the title and body", got)
	}
	if pr.Number != got.Number || pr.URL == "" || pr.Branch != "legion/DEMO-1" {
		t.Errorf("OpenPullRequest returned %+v; want #%d with its URL", pr, got.Number)
	}
	again, created, err := c.OpenPullRequest(t.Context(), "DEMO-1", "main", "another title", "")
	if err != nil || created || again.Number != pr.Number {
		t.Errorf("OpenPullRequest again = #%d, created %v, %v; want #%d found, not created", again.Number, created, err, pr.Number)
	}
	if n := srv.Calls("LegionCreatePullRequest"); n != 1 {
		t.Errorf("createPullRequest sent %d times; want 1", n)
	}
	if _, _, err := c.OpenPullRequest(t.Context(), "DEMO-2", "main", " ", ""); err == nil || !strings.Contains(err.Error(), "title is empty") {
		t.Errorf("OpenPullRequest with no title = %v; want an error saying so", err)
	}
}

// TestOpenPullRequestRefused: GitHub's refusal (a branch that was not
// pushed) comes back with GitHub's words and the branch.
func TestOpenPullRequestRefused(t *testing.T) {
	c, srv := newTest(t, nil)
	srv.ServeGit(t, gitRepo(t))
	_, _, err := c.OpenPullRequest(t.Context(), "DEMO-1", "main", "DEMO-1: greet", "")
	if err == nil || !strings.Contains(err.Error(), "legion/DEMO-1") || !strings.Contains(err.Error(), "Head ref must be a branch") {
		t.Errorf("OpenPullRequest of an unpushed branch = %v; want GitHub's refusal naming the branch", err)
	}
}

// TestAddLabel: a review outcome goes on the branch's open pull request;
// the label is created in the repository the first time, found after.
func TestAddLabel(t *testing.T) {
	c, srv := newTest(t, nil)
	if err := c.AddLabel(t.Context(), "DEMO-1", "worker-approved"); err == nil || !strings.Contains(err.Error(), "legion issue pr") {
		t.Errorf("AddLabel without a pull request = %v; want an error saying who opens it", err)
	}
	srv.AddPR("legion/DEMO-1", "OPEN")
	srv.AddPR("legion/DEMO-2", "OPEN")
	for range 2 {
		if err := c.AddLabel(t.Context(), "DEMO-1", "worker-approved"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddLabel(t.Context(), "DEMO-2", "worker-approved"); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"legion/DEMO-1", "legion/DEMO-2"} {
		pr, _ := srv.PR(b)
		if names := srv.LabelNames(&pr); !slices.Equal(names, []string{"worker-approved"}) {
			t.Errorf("%s has labels %q; want worker-approved once", b, names)
		}
	}
	if n := srv.Calls("LegionCreateLabel"); n != 1 {
		t.Errorf("createLabel sent %d times; want 1 (the label is created once, then found)", n)
	}
	if n := srv.Calls("LegionAddLabels"); n != 2 {
		t.Errorf("addLabelsToLabelable sent %d times; want 2 (a label present already is not added again)", n)
	}
	if err := c.RemoveLabel(t.Context(), "DEMO-1", "worker-approved"); err != nil {
		t.Fatal(err)
	}
	if pr, _ := srv.PR("legion/DEMO-1"); len(srv.LabelNames(&pr)) != 0 {
		t.Errorf("worker-approved still on the pull request after RemoveLabel")
	}
}

// TestGitURL: where git pushes, by endpoint.
func TestGitURL(t *testing.T) {
	for endpoint, want := range map[string]string{
		DefaultEndpoint:                         "https://github.com/legion-dev/demo.git",
		"https://ghe.example.com/api/graphql":   "https://ghe.example.com/legion-dev/demo.git",
		"http://127.0.0.1:4000/graphql":         "http://127.0.0.1:4000/legion-dev/demo.git",
		"https://ghe.example.com:8443/api/gql/": "https://ghe.example.com:8443/legion-dev/demo.git",
	} {
		c, _ := newTest(t, func(o *Options) { o.Endpoint = endpoint })
		if got, err := c.GitURL(); got != want || err != nil {
			t.Errorf("GitURL() with endpoint %s = %q, %v; want %q", endpoint, got, err, want)
		}
	}
}

// TestAskpass: git's prompts answered from PushEnv's environment; the
// token only for the password, from the named variable.
func TestAskpass(t *testing.T) {
	c, _ := newTest(t, nil)
	env := map[string]string{}
	for _, kv := range c.PushEnv("/usr/bin/legion") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["GIT_ASKPASS"] != "/usr/bin/legion" || env[EnvAskpass] != "1" {
		t.Fatalf("PushEnv = %v; want legion as GIT_ASKPASS", env)
	}
	for _, v := range env {
		if strings.Contains(v, testToken) {
			t.Fatalf("PushEnv carries the token: %v", env)
		}
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == testEnv {
			return testToken
		}
		return ""
	}
	for prompt, want := range map[string]string{
		"Username for 'https://github.com': ":                "x-access-token",
		"Password for 'https://x-access-token@github.com': ": testToken,
	} {
		if got, err := AskpassFromEnv(prompt, getenv); got != want || err != nil {
			t.Errorf("AskpassFromEnv(%q) = %q, %v; want %q", prompt, got, err, want)
		}
	}
	if got, err := AskpassFromEnv("Are you sure you want to continue connecting (yes/no)? ", getenv); err == nil || got != "" {
		t.Errorf("AskpassFromEnv(a host key question) = %q, %v; want an error and no answer", got, err)
	}
}

// gitRepo is a new repository with one commit on main.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is required (apt-get install git)")
		}
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}
