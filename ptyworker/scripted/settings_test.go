package scripted

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseSettings(t *testing.T) {
	data := `{
  "env": {"X": "1"},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash|Write", "hooks": [{"type": "command", "command": "legion hook", "timeout": 1.5}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "a"}, {"type": "prompt", "prompt": "done?"}]}]
  },
  "permissions": {"allow": ["Bash(legion issue:*)", "Bash(make test)", "Read"], "deny": ["Bash(rm:*)"], "defaultMode": "dontAsk"}
}`
	s, err := ParseSettings([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Hooks["PreToolUse"]; len(got) != 1 || got[0].Matcher != "Bash|Write" || len(got[0].Hooks) != 1 ||
		got[0].Hooks[0] != (Hook{Command: "legion hook", Timeout: 1500 * time.Millisecond}) {
		t.Errorf("PreToolUse hooks = %+v", got)
	}
	if got := s.Hooks["Stop"]; len(got) != 1 || len(got[0].Hooks) != 1 || got[0].Hooks[0].Command != "a" {
		t.Errorf("Stop hooks = %+v; want the command hook only", got)
	}
	want := Permissions{
		Allow:       []Rule{{"Bash", "legion issue:*"}, {"Bash", "make test"}, {"Read", ""}},
		Deny:        []Rule{{"Bash", "rm:*"}},
		DefaultMode: "dontAsk",
	}
	if diff := cmp.Diff(want, s.Permissions); diff != "" {
		t.Errorf("permissions mismatch (-want +got):\n%s", diff)
	}
	m := s.Hooks["PreToolUse"][0]
	for subject, want := range map[string]bool{"Bash": true, "Write": true, "BashX": false, "Read": false} {
		if got := m.matches(subject); got != want {
			t.Errorf("matcher %q matches %q = %v; want %v", m.Matcher, subject, got, want)
		}
	}
}

func TestParseSettingsErrors(t *testing.T) {
	tests := []struct{ data, wantInErr string }{
		{`[]`, "not a settings JSON object"},
		{`{} {}`, "data after the object"},
		{`{"hooks": {"Stop": {}}}`, "not a settings JSON object"},
		{`{"hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}}`, `hooks.Stop[0].hooks[0].type: missing`},
		{`{"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}`, `hooks.Stop[0].hooks[0].command: missing`},
		{`{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]}}`, `timeout 0: want a positive number`},
		{`{"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}`, `hooks.PreToolUse[0].matcher "("`},
		{`{"permissions": {"allow": ["Bash(git"]}}`, `permissions.allow[0]: rule "Bash(git"`},
		{`{"permissions": {"deny": ["(x)"]}}`, `permissions.deny[0]`},
		{`{"permissions": {"defaultMode": "yolo"}}`, `permissions.defaultMode: permission mode "yolo"`},
	}
	for _, tt := range tests {
		_, err := ParseSettings([]byte(tt.data))
		if err == nil || !strings.Contains(err.Error(), tt.wantInErr) {
			t.Errorf("ParseSettings(%s) error = %v; want it to contain %q", tt.data, err, tt.wantInErr)
		}
	}
}

func TestPolicyBash(t *testing.T) {
	settings := &Settings{Permissions: Permissions{
		Allow: []Rule{{"Bash", "legion issue:*"}, {"Bash", "git:*"}, {"Bash", "make test"}, {"Bash", "npm run *"}},
		Deny:  []Rule{{"Bash", "git push:*"}},
		Ask:   []Rule{{"Bash", "git reset:*"}},
	}}
	tests := []struct {
		mode    string
		allowed []Rule
		cmd     string
		want    verdict
	}{
		{"", nil, "legion issue label X worker-done", verdictAllow},
		{"", nil, "legion issues", verdictAsk},
		{"", nil, "legion", verdictAsk},
		{"", nil, "git", verdictAllow},
		{"", nil, "git status && git add -A", verdictAllow},
		{"", nil, "git status && rm -rf x", verdictAsk},
		{"", nil, "git status; git push origin", verdictDeny},
		{"", nil, "git reset --hard", verdictAsk},
		{"", nil, "make test", verdictAllow},
		{"", nil, "make test-all", verdictAsk},
		{"", nil, "npm run build", verdictAllow},
		{"", nil, "echo 'a && b'", verdictAllow}, // read-only
		{"", nil, "echo 'a && b' | sh", verdictAsk},
		{"", []Rule{{"Bash", "sh:*"}}, "echo 'a && b' | sh", verdictAllow},
		{"", []Rule{{"Bash", ""}}, "rm x | sh", verdictAllow},
		{"dontAsk", nil, "touch x", verdictDeny},
		{"dontAsk", nil, "git log", verdictAllow},
		{"bypassPermissions", nil, "touch x", verdictAllow},
		{"bypassPermissions", nil, "git push", verdictDeny},
		{"default", nil, "touch x", verdictAsk},
		{"manual", nil, "git status; ls", verdictAllow},
	}
	for _, tt := range tests {
		p := newPolicy(Args{PermissionMode: tt.mode, AllowedTools: tt.allowed}, settings)
		if got := p.bash(tt.cmd); got != tt.want {
			t.Errorf("mode %q allowed %v: bash(%q) = %v; want %v", tt.mode, tt.allowed, tt.cmd, got, tt.want)
		}
	}
	if p := newPolicy(Args{}, nil); p.mode != "auto" {
		t.Errorf("mode with no flag and no settings = %q; want auto", p.mode)
	}
	p := newPolicy(Args{}, nil)
	if r := p.dontAskAgain("touch a b"); r != (Rule{"Bash", "touch *"}) || p.bash("touch c") != verdictAllow {
		t.Errorf("dontAskAgain(touch a b) = %v, then touch c is %v; want Bash(touch *) and allowed", r, p.bash("touch c"))
	}
	if p := newPolicy(Args{PermissionMode: "manual"}, nil); p.mode != "default" {
		t.Errorf("mode manual = %q in payloads; want default", p.mode)
	}
	for cmd, want := range map[string]string{"legion issue comment X hi": "legion issue", "git -C d commit": "git", "touch a": "touch", "make test": "make"} {
		if got := rulePrefix(cmd); got != want {
			t.Errorf("rulePrefix(%q) = %q; want %q", cmd, got, want)
		}
	}
}

func TestSubcommands(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a", []string{"a"}},
		{"a && b || c; d | e\nf", []string{"a", "b", "c", "d", "e", "f"}},
		{`echo "x && y" 'p | q'`, []string{`echo "x && y" 'p | q'`}},
		{`echo "a \" && b"`, []string{`echo "a \" && b"`}},
		{"sleep 1 & echo", []string{"sleep 1 & echo"}},
		{"  ;  ", nil},
	}
	for _, tt := range tests {
		if got := subcommands(tt.in); !cmp.Equal(got, tt.want) {
			t.Errorf("subcommands(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParseSettings: any input is parsed or rejected without a panic, and
// what is accepted can be used (matchers, rules, modes).
func FuzzParseSettings(f *testing.F) {
	f.Add([]byte(`{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"legion hook","timeout":86400}]}]},"permissions":{"allow":["Bash(legion issue:*)"],"defaultMode":"default"}}`))
	f.Add([]byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"x"}]}]}}`))
	f.Add([]byte(`{"permissions":{"allow":["Bash(npm run *)","Bash(*)","Read"],"deny":["Bash(git push:*)"]}}`))
	f.Add([]byte(`{"hooks":{"PreToolUse":[{"matcher":"Edit|Write.*","hooks":[]}]}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSettings(data)
		if err != nil {
			if err.Error() == "" {
				t.Error("empty error")
			}
			return
		}
		for _, ms := range s.Hooks {
			for _, m := range ms {
				m.matches("Bash")
				for _, h := range m.Hooks {
					if h.Command == "" || h.Timeout < 0 {
						t.Errorf("accepted hook %+v", h)
					}
				}
			}
		}
		p := newPolicy(Args{}, s)
		p.bash("git status && legion issue show X")
		if err := checkMode(p.mode); err != nil {
			t.Errorf("accepted mode: %v", err)
		}
	})
}

// FuzzParseKeys: any terminal input parses without a panic, keeping
// every printable character it does not consume in a sequence.
func FuzzParseKeys(f *testing.F) {
	f.Add([]byte("hello\r\x1b[A\x1b[B\x1bx\x7f3\n"))
	f.Add([]byte("\x1b[200~pasted\x1b[201~\xe2\x9c"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tty := range []bool{false, true} {
			keys, rest := parseKeys(data, tty)
			if len(rest) > 3 {
				t.Errorf("rest %q: longer than a partial rune", rest)
			}
			for _, k := range keys {
				if k.kind == keyRune && k.r < 0x20 && (k.r != '\n' || !tty) {
					t.Errorf("control character %q as a rune (tty %v)", k.r, tty)
				}
			}
		}
	})
}
