package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	vars := Vars{
		SessionID: "0b9b6a1e-1111-5222-8333-444455556666",
		Prompt:    "Use the legion-worker skill; mode: implement; issue: DEMO-1. $(rm -rf /) 'quoted'",
		Issue:     "DEMO-1",
		Mode:      "implement",
		Workspace: "/home/u/src/my demo",
	}
	tests := []struct {
		argv    []string
		want    []string
		wantErr string
	}{
		{
			argv: defaultAgentNew,
			want: []string{"claude", "--session-id", vars.SessionID, vars.Prompt},
		},
		{
			argv: defaultAgentResume,
			want: []string{"claude", "--resume", vars.SessionID, vars.Prompt},
		},
		{
			argv: []string{"agent", "--cwd={workspace}", "{issue}:{mode}", "{{literal}}", "a}b", "{prompt}{prompt}"},
			want: []string{"agent", "--cwd=/home/u/src/my demo", "DEMO-1:implement", "{literal}", "a}b", vars.Prompt + vars.Prompt},
		},
		{
			argv:    []string{"claude", "{sessionid}"},
			wantErr: `argument 1 "{sessionid}": unknown placeholder {sessionid}: expected one of {session_id}, {prompt}, {issue}, {mode}, {workspace}`,
		},
		{
			argv:    []string{"claude", "{prompt", "{}"},
			wantErr: "argument 1 \"{prompt\": unclosed \"{\": write \"{{\" for a literal brace\nargument 2 \"{}\": unknown placeholder {}: expected one of {session_id}, {prompt}, {issue}, {mode}, {workspace}",
		},
		{
			argv:    []string{"x", "{a{b}"},
			wantErr: `argument 1 "{a{b}": unclosed "{": write "{{" for a literal brace`,
		},
	}
	for _, tt := range tests {
		got, err := Expand(tt.argv, vars)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Expand(%q) error = %v; want %q", tt.argv, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Expand(%q) = %v", tt.argv, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Expand(%q) mismatch (-want +got):\n%s", tt.argv, diff)
		}
	}
}

func TestExpandDoesNotAliasInput(t *testing.T) {
	argv := []string{"a", "{mode}"}
	out, err := Expand(argv, Vars{Mode: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	out[0] = "changed"
	if argv[0] != "a" || argv[1] != "{mode}" {
		t.Errorf("Expand changed its input: %q", argv)
	}
}
