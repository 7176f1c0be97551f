package scripted

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseScript(t *testing.T) {
	script := `# comment

say hello $PROMPT
if-new once work 2s
if-resumed if-prompt review subagent 500ms
if-env LEGION_MODE=implement run git commit -m "a message" 'x y'
ask Which one? | red | blue
ask Size? | S | L ;; Days? | Mon
bash git status && make test
apierror rate_limit slow down
permission-notify 100ms
if-denied if-answer red idle-notify 1s
tick 50ms
sleep 1s
crash KILL
crash 3
exit 0
hang`
	steps, err := parseScript(script)
	if err != nil {
		t.Fatal(err)
	}
	want := []step{
		{line: 3, kind: "say", text: "hello $PROMPT"},
		{line: 4, kind: "work", text: "2s", dur: 2 * time.Second, conds: []cond{{kind: "if-new"}, {kind: "once"}}},
		{line: 5, kind: "subagent", text: "500ms", dur: 500 * time.Millisecond, conds: []cond{{kind: "if-resumed"}, {kind: "if-prompt", arg: "review"}}},
		{line: 6, kind: "run", text: `git commit -m "a message" 'x y'`, words: []string{"git", "commit", "-m", "a message", "x y"}, conds: []cond{{kind: "if-env", arg: "LEGION_MODE=implement"}}},
		{line: 7, kind: "ask", text: "Which one? | red | blue", questions: []askQuestion{{text: "Which one?", header: "Question", options: []string{"red", "blue"}}}},
		{line: 8, kind: "ask", text: "Size? | S | L ;; Days? | Mon", questions: []askQuestion{
			{text: "Size?", header: "Question 1", options: []string{"S", "L"}},
			{text: "Days?", header: "Question 2", options: []string{"Mon"}},
		}},
		{line: 9, kind: "bash", text: "git status && make test"},
		{line: 10, kind: "apierror", text: "slow down", errKind: "rate_limit"},
		{line: 11, kind: "permission-notify", text: "100ms", dur: 100 * time.Millisecond},
		{line: 12, kind: "idle-notify", text: "1s", dur: time.Second, conds: []cond{{kind: "if-denied"}, {kind: "if-answer", arg: "red"}}},
		{line: 13, kind: "tick", text: "50ms", dur: 50 * time.Millisecond},
		{line: 14, kind: "sleep", text: "1s", dur: time.Second},
		{line: 15, kind: "crash", text: "KILL", signal: syscall.SIGKILL},
		{line: 16, kind: "crash", text: "3", code: 3},
		{line: 17, kind: "exit", text: "0"},
		{line: 18, kind: "hang"},
	}
	if diff := cmp.Diff(want, steps, cmp.AllowUnexported(step{}, cond{}, askQuestion{})); diff != "" {
		t.Errorf("parseScript mismatch (-want +got):\n%s", diff)
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		script, wantInErr string
	}{
		{"dance", `line 1 "dance": unknown step "dance"`},
		{"say hi\nwork soon", `line 2 "work soon"`},
		{"tick 0s", "positive duration"},
		{"exit 300", "0-255"},
		{"crash FOO", "signal name"},
		{"if-new", "conditions without a step"},
		{"if-prompt", "needs an argument"},
		{"if-env X say hi", "NAME=VALUE"},
		{"run", "needs a command"},
		{`run echo "open`, "unterminated"},
		{"say", "needs text"},
		{"ask | a | b", "needs a question"},
		{"ask Q? | a ;; | b", "needs a question"},
		{"ask Q? | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9", "at most 8 options"},
		{"bash", "needs a command"},
		{"apierror teapot", "want one of rate_limit"},
		{"permission-notify soon", "positive duration"},
		{"if-answer", "needs an argument"},
		{"hang now", "no argument"},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			_, err := parseScript(tt.script)
			if err == nil || !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("parseScript(%q) error = %v; want it to contain %q", tt.script, err, tt.wantInErr)
			}
		})
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a b  c", []string{"a", "b", "c"}},
		{`a "b c" 'd e'`, []string{"a", "b c", "d e"}},
		{`x"y z"w`, []string{"xy zw"}},
		{`"" ''`, []string{"", ""}},
		{`"a \"q\" \\ b"`, []string{`a "q" \ b`}},
		{`'no \escape'`, []string{`no \escape`}},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if err != nil || !cmp.Equal(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
