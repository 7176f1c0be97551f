package instructions

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func sample(mode string) Data {
	return Data{Team: "web", Issue: "DEMO-1", Mode: mode, Branch: "legion/DEMO-1",
		Worktree: "/home/u/.local/state/legion/worktrees/abcd/DEMO-1", Base: "main",
		Review: "local", AskTool: true, Legion: "legion"}
}

var block = regexp.MustCompile("(?m)^```sh\n(.*)\n```$")

func TestRenderBuiltin(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range append(Modes, ModeController) {
		t.Run(mode, func(t *testing.T) {
			d := sample(mode)
			text, err := s.Render(d)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(text, "# Legion: "+mode) {
				t.Errorf("Render(%s) starts %q; want the # Legion: header", mode, text[:min(40, len(text))])
			}
			cmds := block.FindAllStringSubmatch(text, -1)
			if len(cmds) == 0 {
				t.Fatalf("Render(%s) has no sh block:\n%s", mode, text)
			}
			for _, c := range cmds {
				if strings.ContainsAny(c[1], "$`\n") {
					t.Errorf("Render(%s): block %q expands something or spans lines", mode, c[1])
				}
				if strings.HasPrefix(c[1], "legion ") && !strings.Contains(c[1], " web") {
					t.Errorf("Render(%s): block %q does not name the team", mode, c[1])
				}
			}
			if strings.Contains(text, "{{") || strings.Contains(text, "<no value>") {
				t.Errorf("Render(%s) left template text:\n%s", mode, text)
			}
		})
	}
}

func TestRenderAsk(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	d := sample("plan")
	withTool, _ := s.Render(d)
	d.AskTool = false
	inText, _ := s.Render(d)
	if !strings.Contains(withTool, "AskUserQuestion") || strings.Contains(inText, "AskUserQuestion") {
		t.Errorf("AskTool decides whether AskUserQuestion is named:\nwith:\n%s\nwithout:\n%s", withTool, inText)
	}
}

func TestRenderGitHub(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	d := sample("implement")
	d.Review = "github"
	text, err := s.Render(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, d.Legion+` issue pr web DEMO-1 "DEMO-1: <title>"`) {
		t.Errorf("implement with github review: Legion does not push the branch and open its pull request:\n%s", text)
	}
	if strings.Contains(text, "git push") || strings.Contains(text, "gh pr") {
		t.Errorf("implement with github review: the agent is told to push with credentials of its own:\n%s", text)
	}
}

func TestOverride(t *testing.T) {
	dir := t.TempDir()
	good := "# Legion: plan {{.Issue}}\n\nThink hard, then:\n\n```sh\n{{.Legion}} issue label {{.Team}} {{.Issue}} worker-done\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "plan.md"), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(a good override) = %v", err)
	}
	text, err := s.Render(sample("plan"))
	if err != nil || !strings.Contains(text, "Think hard") {
		t.Errorf("Render(plan) = %q, %v; want the team's text", text, err)
	}
	if got := s.Source("plan"); got != filepath.Join(dir, "plan.md") {
		t.Errorf("Source(plan) = %q", got)
	}
	if got := s.Source("review"); got != "built-in review.md" {
		t.Errorf("Source(review) = %q", got)
	}

	bad := strings.Replace(good, "worker-done", "worker-finished", 1)
	if err := os.WriteFile(filepath.Join(dir, "plan.md"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir)
	if !errors.Is(err, ErrMissingCommand) || !strings.Contains(err.Error(), filepath.Join(dir, "plan.md")) || !strings.Contains(err.Error(), "issue label T ISSUE-1 worker-done") {
		t.Errorf("Load(an override without worker-done) = %v; want ErrMissingCommand naming the file and the command", err)
	}
}

func TestOverrideErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "agent.instructions_dir") {
		t.Errorf("Load(missing dir) = %v; want an error naming the key", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "planning.md"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "planning.md names no phase") {
		t.Errorf("Load(a file that names no mode) = %v", err)
	}
	os.Remove(filepath.Join(dir, "planning.md"))
	if err := os.WriteFile(filepath.Join(dir, "review.md"), []byte("{{.Nope}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "review.md") {
		t.Errorf("Load(a template with an unknown field) = %v; want an error naming the file", err)
	}
}
