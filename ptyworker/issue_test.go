package ptyworker

import (
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestIssueArgv: an agent's legion issue arguments are run for its own
// team and issue only, with the verbs that act on one issue, the flags
// --json and --author, and its text after "--".
func TestIssueArgv(t *testing.T) {
	s := &proto.Spec{Name: "DEMO-1-implement", Team: "web", Issue: "DEMO-1"}
	for _, c := range []struct {
		name string
		argv []string
		want []string // nil: refused
		err  string
	}{
		{"label", []string{"label", "web", "DEMO-1", "worker-done"}, []string{"issue", "label", "--", "web", "DEMO-1", "worker-done"}, ""},
		{"issue id in another case", []string{"show", "web", "demo-1"}, []string{"issue", "show", "--", "web", "demo-1"}, ""},
		{"flags anywhere", []string{"show", "--json", "web", "DEMO-1"}, []string{"issue", "show", "--json", "--", "web", "DEMO-1"}, ""},
		{"author", []string{"comment", "web", "DEMO-1", "--author", "ana", "hi"}, []string{"issue", "comment", "--author", "ana", "--", "web", "DEMO-1", "hi"}, ""},
		{"text like a flag", []string{"comment", "--", "web", "DEMO-1", "-x marks it"}, []string{"issue", "comment", "--", "web", "DEMO-1", "-x marks it"}, ""},
		{"pull request", []string{"pr", "web", "DEMO-1", "DEMO-1: greet", "body"}, []string{"issue", "pr", "--", "web", "DEMO-1", "DEMO-1: greet", "body"}, ""},
		{"another issue", []string{"label", "web", "DEMO-2", "worker-done"}, nil, "session DEMO-1-implement may act only on issue DEMO-1 of team web, not DEMO-2 of team web"},
		{"another team", []string{"label", "api", "DEMO-1", "worker-done"}, nil, "may act only on issue DEMO-1 of team web"},
		{"add", []string{"add", "web", "DEMO-1"}, nil, "want show|move|label|unlabel|comment"},
		{"too few", []string{"show", "web"}, nil, "want show|move"},
		{"other flag", []string{"show", "--config", "/x", "web", "DEMO-1"}, nil, `flag "--config" is not passed on`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := issueArgv(s, c.argv)
			if c.want != nil {
				if err != nil || !slices.Equal(got, c.want) {
					t.Errorf("issueArgv(%q) = %q, %v; want %q", c.argv, got, err, c.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("issueArgv(%q) = %q, %v; want an error with %q", c.argv, got, err, c.err)
			}
		})
	}
}

// TestChildEnvSandboxed: a sandboxed agent gets no key agent's socket
// (the keys it would sign with are what the sandbox hides); an
// unsandboxed one keeps it.
func TestChildEnvSandboxed(t *testing.T) {
	base := []string{"PATH=/bin", "SSH_AUTH_SOCK=/run/user/1000/ssh-agent.socket", "GPG_AGENT_INFO=/run/user/1000/gnupg/S.gpg-agent:0:1"}
	s := &proto.Spec{SessionID: "0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c", Name: "n", Team: "web", Paths: proto.Paths{RuntimeDir: "/run/user/1000/legion"}}
	has := func(env []string, kv string) bool { return slices.Contains(env, kv) }
	if env := childEnv(base, s, "tok"); !has(env, base[1]) || !has(env, base[2]) {
		t.Errorf("unsandboxed env %q: want the key agents kept", env)
	}
	s.Sandbox = &api.Sandbox{Read: []string{"/"}}
	if env := childEnv(base, s, "tok"); !has(env, "SSH_AUTH_SOCK=") || !has(env, "GPG_AGENT_INFO=") || !has(env, "PATH=/bin") {
		t.Errorf("sandboxed env %q: want SSH_AUTH_SOCK and GPG_AGENT_INFO emptied, the rest kept", env)
	}
}
