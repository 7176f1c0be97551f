package scripted

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

func TestParseArgs(t *testing.T) {
	const id = "227d823e-000c-589c-88f2-f41d3949ab71"
	tests := []struct {
		name    string
		args    []string
		want    Args
		wantErr bool
	}{
		{"new", []string{"--session-id", id, "do it"}, Args{SessionID: uuid.MustParse(id), Prompt: "do it"}, false},
		{"new equals", []string{"--session-id=" + id, "do", "it"}, Args{SessionID: uuid.MustParse(id), Prompt: "do it"}, false},
		{"resume", []string{"--resume", id, "go on"}, Args{SessionID: uuid.MustParse(id), Resume: true, Prompt: "go on"}, false},
		{"resume short", []string{"-r", id}, Args{SessionID: uuid.MustParse(id), Resume: true}, false},
		{"claude flags ignored", []string{"--chrome", "--model", "opus", "--session-id", id, "--verbose", "p"}, Args{SessionID: uuid.MustParse(id), Prompt: "p"}, false},
		{"double dash", []string{"--session-id", id, "--", "--not-a-flag"}, Args{SessionID: uuid.MustParse(id), Prompt: "--not-a-flag"}, false},
		{"both", []string{"--session-id", id, "--resume", id}, Args{}, true},
		{"bad uuid", []string{"--session-id", "nope"}, Args{}, true},
		{"bad resume", []string{"--resume", "nope"}, Args{}, true},
		{"missing value", []string{"--session-id"}, Args{}, true},
		{"continue", []string{"--continue"}, Args{}, true},
		{"settings and permissions", []string{"--settings", "/s.json", "--permission-mode", "dontAsk", "--session-id", id, "p"},
			Args{SessionID: uuid.MustParse(id), Prompt: "p", Settings: "/s.json", PermissionMode: "dontAsk"}, false},
		{"skip permissions", []string{"--dangerously-skip-permissions", "--session-id", id},
			Args{SessionID: uuid.MustParse(id), PermissionMode: "bypassPermissions"}, false},
		{"allowed tools swallow the prompt", []string{"--session-id", id, "--allowedTools", "Bash(git:*)", "Read,Bash(legion issue:*)", "p"},
			Args{SessionID: uuid.MustParse(id), AllowedTools: []Rule{{"Bash", "git:*"}, {"Read", ""}, {"Bash", "legion issue:*"}, {"p", ""}}}, false},
		{"allowed tools then --", []string{"--session-id", id, "--allowedTools", "Bash(make test)", "--disallowedTools=Bash(rm:*)", "--", "p"},
			Args{SessionID: uuid.MustParse(id), Prompt: "p", AllowedTools: []Rule{{"Bash", "make test"}}, DisallowedTools: []Rule{{"Bash", "rm:*"}}}, false},
		{"bad mode", []string{"--permission-mode", "yolo"}, Args{}, true},
		{"bad rule", []string{"--allowedTools", "Bash(git"}, Args{}, true},
		{"no rule", []string{"--allowedTools", "--", "p"}, Args{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseArgs(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseArgs(%q) error = %v; want error %v", tt.args, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); err == nil && diff != "" {
				t.Errorf("ParseArgs(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestParseArgsRandomID(t *testing.T) {
	a, err := ParseArgs([]string{"hello"})
	if err != nil || a.SessionID == uuid.Nil || a.Resume || a.Prompt != "hello" {
		t.Errorf("ParseArgs(hello) = %+v, %v; want a random new session", a, err)
	}
	if _, err := ParseArgs([]string{"--help"}); !errors.Is(err, ErrHelp) {
		t.Errorf("ParseArgs(--help) error = %v; want ErrHelp", err)
	}
}
