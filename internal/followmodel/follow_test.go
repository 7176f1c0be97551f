package followmodel

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fence is a Markdown code fence (a raw string cannot hold backticks).
const fence = "```"

// sh is a ```sh block holding command.
func sh(command string) string { return fence + "sh\n" + command + "\n" + fence + "\n" }

// The instructions of the tests, in the format Legion renders.
var (
	planText = "# Legion: plan DEMO-1 (team web)\n\nYou plan issue DEMO-1 of team web.\n\n" +
		"1. Read the issue:\n" + sh("legion issue show web DEMO-1") +
		"2. Write your plan as a comment:\n" + sh(`legion issue comment web DEMO-1 "Plan: <your plan>"`) +
		"3. End the phase, then end your turn:\n" + sh("legion issue label web DEMO-1 worker-done")
	askText = planText + "\nTo ask a person, use the AskUserQuestion tool.\n"

	implementText = "# Legion: implement DEMO-1 (team web)\n\n" +
		sh("legion issue show web DEMO-1") +
		sh(`git commit -am "<commit message>"`) +
		sh("legion issue label web DEMO-1 worker-done")

	retroText = "# Legion: retro DEMO-1 (team web)\n\n" +
		sh("legion issue show web DEMO-1") +
		sh(`legion issue comment web DEMO-1 "Retro: <what you learned>"`) +
		sh("legion issue label web DEMO-1 worker-done")

	notesText = "# Legion: review DEMO-1 (team web)\n\n" +
		sh("legion issue show web DEMO-1") +
		sh(`legion issue comment web DEMO-1 "Review: <your notes>"`) +
		"If you approve:\n\n" + sh("legion issue label web DEMO-1 worker-approved") +
		"If changes are needed:\n\n" + sh("legion issue label web DEMO-1 worker-changes-requested") +
		sh("legion issue label web DEMO-1 worker-done")

	reviewText = "# Legion: review DEMO-1 (team web)\n\n" +
		sh("legion issue show web DEMO-1") +
		"Record the outcome:\n\n" +
		"If changes are needed:\n" + sh(`legion issue comment web DEMO-1 "Changes requested: <what must change>"`) +
		"If you approve:\n" + sh(`legion issue comment web DEMO-1 "Approved: <why>"`) +
		"Then label it:\n\n" +
		"- If changes are needed:\n  " + strings.ReplaceAll(sh("legion issue label web DEMO-1 worker-changes-requested"), "\n", "\n  ") +
		"\n- **If you approve:**\n  " + strings.ReplaceAll(sh("legion issue label web DEMO-1 worker-done"), "\n", "\n  ")
)

// convo builds a transcript: a string is a user text; a call is "$ cmd"
// (its result follows as "> text", "! text" for an error); "? q" is a
// question the assistant asked with the question tool, "~ text" an
// assistant text.
func convo(parts ...string) []Item {
	var items []Item
	id := 0
	for _, p := range parts {
		switch {
		case strings.HasPrefix(p, "$ "):
			id++
			items = append(items, Item{Role: Assistant, Call: &Call{ID: strconv.Itoa(id), Tool: "Bash", Command: p[2:]}})
		case strings.HasPrefix(p, "? "):
			id++
			items = append(items, Item{Role: Assistant, Call: &Call{ID: strconv.Itoa(id), Tool: "AskUserQuestion", Question: p[2:]}})
		case strings.HasPrefix(p, "> "), strings.HasPrefix(p, "! "):
			items = append(items, Item{Role: User, Result: &Result{CallID: strconv.Itoa(id), Text: p[2:], IsError: p[0] == '!'}})
		case strings.HasPrefix(p, "~ "):
			items = append(items, Item{Role: Assistant, Text: p[2:]})
		default:
			items = append(items, Item{Role: User, Text: p})
		}
	}
	return items
}

const (
	show         = "$ legion issue show web DEMO-1"
	showResult   = "> DEMO-1  Add a greeting\nstatus: Todo\nlabels: "
	planComment  = `$ legion issue comment web DEMO-1 "Plan: Read the issue, write a failing test first, then make it pass"`
	planDone     = "$ legion issue label web DEMO-1 worker-done"
	question     = "Which database should it use? (postgres|sqlite)"
	withQuestion = "> DEMO-1  Add a greeting\nstatus: Todo\nlabels: \n\nQuestion: " + question
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name    string
		items   []Item
		askTool string
		traits  Traits
		want    Decision
	}{
		{
			name:  "no instructions",
			items: convo("Use legion-worker skill in plan mode for issue DEMO-1"),
			want:  Decision{Action: Say, Text: NoInstructions + ": no message gives me commands to run, so I stop here."},
		},
		{
			name:  "plan first step",
			items: convo("<system-reminder>skills: none</system-reminder>", planText),
			want:  Decision{Action: Run, Command: "legion issue show web DEMO-1", Description: "Run legion issue show", Step: 1, Steps: 3},
		},
		{
			name:  "plan fills the placeholder",
			items: convo(planText, show, showResult),
			want:  Decision{Action: Run, Command: planComment[2:], Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name:  "plan ends the phase",
			items: convo(planText, show, showResult, planComment, "> "),
			want:  Decision{Action: Run, Command: planDone[2:], Description: "Run legion issue label", Step: 3, Steps: 3},
		},
		{
			name:  "plan done",
			items: convo(planText, show, showResult, planComment, "> ", planDone, "> "),
			want:  Decision{Action: Say, Text: "Done: I ran all 3 steps of the instructions."},
		},
		{
			name:  "a comment written otherwise counts",
			items: convo(planText, show, showResult, `$ legion issue comment web DEMO-1 "Plan: something else"`, "> "),
			want:  Decision{Action: Run, Command: planDone[2:], Description: "Run legion issue label", Step: 3, Steps: 3},
		},
		{
			name:  "restart with the same instructions continues",
			items: convo(planText, show, showResult, planComment, "> ", planText),
			want:  Decision{Action: Run, Command: planDone[2:], Description: "Run legion issue label", Step: 3, Steps: 3},
		},
		{
			name:  "the same instructions after a finished run start afresh",
			items: convo(planText, show, showResult, planComment, "> ", planDone, "> ", "~ Done.", planText),
			want:  Decision{Action: Run, Command: "legion issue show web DEMO-1", Description: "Run legion issue show", Step: 1, Steps: 3},
		},
		{
			name: "a restart of the second run continues it",
			items: convo(planText, show, showResult, planComment, "> ", planDone, "> ", "~ Done.", planText, show, showResult,
				planText),
			want: Decision{Action: Run, Command: planComment[2:], Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name: "a second review in the same conversation approves",
			items: convo(reviewText, show, showResult, `$ legion issue comment web DEMO-1 "Changes requested: x"`, "> ",
				"$ legion issue label web DEMO-1 worker-changes-requested", "> ", "~ Done.", reviewText, show, showResult),
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Approved: Looks good: the tests cover the change"`,
				Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name: "retro after implement starts afresh",
			items: convo(implementText, show, showResult, `$ git commit -am "Do what the issue asks"`, "> [main 1234567] x",
				planDone, "> ", "~ Done.", retroText),
			want: Decision{Action: Run, Command: "legion issue show web DEMO-1", Description: "Run legion issue show", Step: 1, Steps: 3},
		},
		{
			name:  "retro continues its own steps",
			items: convo(implementText, show, showResult, planDone, "> ", retroText, show, showResult),
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Retro: Small steps kept the review short"`,
				Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name:  "a strict reviewer requests changes first",
			items: convo(reviewText, show, showResult),
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Changes requested: Please add a test for the empty case"`,
				Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name: "the next choice takes the same side",
			items: convo(reviewText, show, showResult,
				`$ legion issue comment web DEMO-1 "Changes requested: Please add a test for the empty case"`, "> Changes requested: noted"),
			want: Decision{Action: Run, Command: "legion issue label web DEMO-1 worker-changes-requested", Description: "Run legion issue label", Step: 3, Steps: 3},
		},
		{
			name:  "a review after changes were requested approves",
			items: convo(reviewText, show, showResult+"\n\nreviewer (2026-11-29 03:00):\nChanges requested: Please add a test"),
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Approved: Looks good: the tests cover the change"`,
				Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name: "its own earlier label counts as changes requested",
			items: convo(reviewText, show, showResult, `$ legion issue comment web DEMO-1 "Changes requested: x"`, "> ",
				"$ legion issue label web DEMO-1 worker-changes-requested", "> ", "~ Done.", reviewText+"\nThe implementer changed it since.\n", show, showResult),
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Approved: Looks good: the tests cover the change"`,
				Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name:   "a lenient reviewer approves",
			items:  convo(reviewText, show, showResult),
			traits: Traits{Lenient: true},
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Approved: Looks good: the tests cover the change"`,
				Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name:  "review notes say the outcome",
			items: convo(notesText, show, showResult),
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Review: Changes requested: please add a test for the empty case"`,
				Description: "Run legion issue comment", Step: 2, Steps: 4},
		},
		{
			name: "the outcome agrees with the notes whatever their result says",
			items: convo(notesText, show, showResult,
				`$ legion issue comment web DEMO-1 "Review: Changes requested: please add a test for the empty case"`,
				"> commented on DEMO-1: Review: Changes requested: please add a test for the empty case"),
			want: Decision{Action: Run, Command: "legion issue label web DEMO-1 worker-changes-requested", Description: "Run legion issue label", Step: 3, Steps: 4},
		},
		{
			name: "a new reviewer finds the earlier notes and approves",
			items: convo(notesText, show,
				showResult+"\n\nreviewer (2026-11-29 03:00):\nReview: Changes requested: please add a test for the empty case"),
			want: Decision{Action: Run, Command: `legion issue comment web DEMO-1 "Review: Approved: the tests cover the change"`,
				Description: "Run legion issue comment", Step: 2, Steps: 4},
		},
		{
			name:    "a question with the question tool",
			items:   convo(askText, show, withQuestion),
			askTool: "AskUserQuestion",
			want:    Decision{Action: Ask, Question: question, Options: []string{"postgres", "sqlite"}},
		},
		{
			name:    "the answered question lets it go on",
			items:   convo(askText, show, withQuestion, "? "+question, `> The user answered: "`+question+`"="sqlite".`),
			askTool: "AskUserQuestion",
			want:    Decision{Action: Run, Command: planComment[2:], Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name:    "a question answered in the issue's comments is not asked",
			items:   convo(askText, show, withQuestion+"\n\nyou (2026-11-29 03:01):\nAnswer: sqlite"),
			askTool: "AskUserQuestion",
			want:    Decision{Action: Run, Command: planComment[2:], Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name:    "a question tool the instructions do not name is not used",
			items:   convo(planText, show, withQuestion),
			askTool: "AskUserQuestion",
			want:    Decision{Action: Say, Text: "Before I go on I need an answer to this question: " + question},
		},
		{
			name:    "asks in text",
			items:   convo(askText, show, "> Question: Ship it today?"),
			askTool: "AskUserQuestion",
			traits:  Traits{AsksInText: true},
			want:    Decision{Action: Say, Text: "Before I go on I need an answer to this question: Ship it today?"},
		},
		{
			name:  "an answer in a new message lets it go on",
			items: convo(planText, show, withQuestion, "~ Before I go on I need an answer to this question: "+question, "sqlite"),
			want:  Decision{Action: Run, Command: planComment[2:], Description: "Run legion issue comment", Step: 2, Steps: 3},
		},
		{
			name:  "an error does not stop it",
			items: convo(planText, show, "! legion: issue DEMO-1 of team web: not found"),
			want: Decision{Action: Run, Command: planComment[2:], Description: "Run legion issue comment", Step: 2, Steps: 3,
				Failed: []Failure{{Command: show[2:], Result: "legion: issue DEMO-1 of team web: not found"}}},
		},
		{
			name:  "the final text names what failed",
			items: convo(planText, show, "! exit status 1\nno such team", planComment, "> ", planDone, "> "),
			want: Decision{Action: Say, Text: "Done: I ran all 3 steps of the instructions. These failed: `legion issue show web DEMO-1` (no such team).",
				Failed: []Failure{{Command: show[2:], Result: "no such team"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(Transcript{Items: tt.items, AskTool: tt.askTool}, tt.traits)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	got := Steps(reviewText)
	want := []Step{
		{Alternatives: []Block{{Command: "legion issue show web DEMO-1"}}},
		{Alternatives: []Block{
			{Condition: "If changes are needed:", Command: `legion issue comment web DEMO-1 "Changes requested: <what must change>"`},
			{Condition: "If you approve:", Command: `legion issue comment web DEMO-1 "Approved: <why>"`},
		}},
		{Alternatives: []Block{
			{Condition: "If changes are needed:", Command: "legion issue label web DEMO-1 worker-changes-requested"},
			{Condition: "If you approve:", Command: "legion issue label web DEMO-1 worker-done"},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Steps(review) (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		name, text string
		want       []Step
	}{
		{"other info strings", fence + "go\nx := 1\n" + fence + "\n" + fence + "\nplain\n" + fence + "\n", nil},
		{"unclosed", "a\n" + fence + "sh\necho hi\n", nil},
		{"empty block", sh(""), nil},
		{"tildes and a longer fence", "~~~sh\necho a\n~~~\n````sh\necho " + fence + "\n````\n",
			[]Step{{Alternatives: []Block{{Command: "echo a"}}}, {Alternatives: []Block{{Command: "echo " + fence}}}}},
		{"work item", "1. Read:\n" + sh("legion issue show web DEMO-1") + "2. Work test first: write the test.\n3. Commit:\n" + sh("git commit -am x"),
			[]Step{{Alternatives: []Block{{Command: "legion issue show web DEMO-1"}}}, {Alternatives: []Block{{Command: WorkCommand}}}, {Alternatives: []Block{{Command: "git commit -am x"}}}}},
		{"work item with its own command", "1. Work on it:\n" + sh("make"), []Step{{Alternatives: []Block{{Command: "make"}}}}},
		{"work item last", sh("git status") + "2. Work it out.\n", []Step{{Alternatives: []Block{{Command: "git status"}}}, {Alternatives: []Block{{Command: WorkCommand}}}}},
		{"work item alone is no instructions", "1. Work on it.\n2. Work more.\n", nil},
		{"inline code is no fence", "run " + fence + "sh echo" + fence + " now", nil},
		{"choices split by text", "If a:\n" + sh("echo a") + "Next:\nIf b:\n" + sh("echo b"),
			[]Step{{Alternatives: []Block{{Condition: "If a:", Command: "echo a"}}}, {Alternatives: []Block{{Condition: "If b:", Command: "echo b"}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Steps(tt.text)); diff != "" {
				t.Errorf("Steps(%q) (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestFill(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`legion issue comment web DEMO-1 "Plan: <your plan>"`, `legion issue comment web DEMO-1 "Plan: Read the issue, write a failing test first, then make it pass"`},
		{`git commit -m <message>`, `git commit -m "Do what the issue asks"`},
		{`echo "<summary>" "<anything>"`, `echo "Implemented as planned; the tests pass" "Done as asked"`},
		{`echo "a < b"`, `echo "a < b"`},
		{`echo '<why>' <why>`, `echo 'Looks good: the tests cover the change' "Looks good: the tests cover the change"`},
		{`echo "it's \"<why>\"" <why>`, `echo "it's \"Looks good: the tests cover the change\"" "Looks good: the tests cover the change"`},
		{`legion issue show web DEMO-1`, `legion issue show web DEMO-1`},
	} {
		if got := Fill(tt.in); got != tt.want {
			t.Errorf("Fill(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	texts := []string{}
	for _, f := range fills {
		texts = append(texts, f.text)
	}
	for _, n := range reviewNotes {
		texts = append(texts, n)
	}
	for _, text := range texts {
		if strings.ContainsAny(text, "<>\"`$\\") {
			t.Errorf("placeholder text %q holds a character a shell or the contract treats specially", text)
		}
	}
	if !changesRequested.MatchString(reviewNotes["changes"]) || changesRequested.MatchString(reviewNotes["approve"]) {
		t.Errorf("review notes %q: only the changes' notes may say changes were requested", reviewNotes)
	}
}

func TestFailedOutput(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want bool
	}{
		{"Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nok", false},
		{"Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\n", true},
		{"Exit code: 1\nWall time: 0 seconds\nOutput:\n", true},
		{"Command: false\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: 1", true},
		{`exec_command failed: CreateProcess { message: "Rejected(\"no\")" }`, true},
		{"the exit code 1 of a test output", false},
		{"hello", false},
	} {
		if got := FailedOutput(tt.out); got != tt.want {
			t.Errorf("FailedOutput(%q) = %v; want %v", tt.out, got, tt.want)
		}
	}
}
