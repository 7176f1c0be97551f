package instructions

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/internal/followmodel"
)

// follow runs the tests' instruction-following model over text as a CLI
// would: each command it asks for is run (its result is results[command],
// else empty) and sent back, until it ends its turn. It returns the
// commands and the final text.
// placeholder is a `<…>` left in a command (a redirection's '>' is not).
var placeholder = regexp.MustCompile(`<[^<>\n]*>`)

func follow(t *testing.T, items []followmodel.Item, results map[string]string) ([]string, string) {
	t.Helper()
	var ran []string
	for n := 0; n < 50; n++ {
		d := followmodel.Decide(followmodel.Transcript{Items: items, AskTool: "AskUserQuestion"}, followmodel.Traits{})
		if d.Action != followmodel.Run {
			return ran, d.Text
		}
		if placeholder.MatchString(d.Command) {
			t.Errorf("the model ran %q, a placeholder left in it", d.Command)
		}
		ran = append(ran, d.Command)
		id := strconv.Itoa(len(items))
		items = append(items,
			followmodel.Item{Role: followmodel.Assistant, Call: &followmodel.Call{ID: id, Tool: "Bash", Command: d.Command}},
			followmodel.Item{Role: followmodel.User, Result: &followmodel.Result{CallID: id, Text: results[d.Command]}})
	}
	t.Fatalf("the model did not end its turn after 50 commands: %q", ran)
	return nil, ""
}

func user(text string) followmodel.Item { return followmodel.Item{Role: followmodel.User, Text: text} }

// TestFollowModelRunsEveryPhase: the built-in instructions of every phase,
// for both review sources and both ways of asking, are what the tests'
// instruction-following model (internal/followmodel) can act on: it runs
// each phase's commands in order, every placeholder filled, and every
// command the phase requires (Required) among them; a first review asks
// for changes, a second one, which reads the first one's notes in the
// issue, approves; a question in the issue is asked with AskUserQuestion
// when the instructions say so, else in text.
func TestFollowModelRunsEveryPhase(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, review := range []string{"local", "github"} {
		for _, ask := range []bool{true, false} {
			for _, mode := range Modes {
				d := sample(mode)
				d.Review, d.AskTool = review, ask
				t.Run(review+"/"+strconv.FormatBool(ask)+"/"+mode, func(t *testing.T) {
					text, err := s.Render(d)
					if err != nil {
						t.Fatal(err)
					}
					ran, final := follow(t, []followmodel.Item{user(text)}, nil)
					if !strings.HasPrefix(final, "Done:") {
						t.Errorf("the model ended with %q after %q; want its final text", final, ran)
					}
					required := Required(d)
					if mode == "review" { // one outcome of the two
						required = slices.DeleteFunc(required, func(c string) bool { return strings.HasSuffix(c, "worker-approved") })
					}
					for _, c := range required {
						if !slices.Contains(ran, c) {
							t.Errorf("the model ran %q; want %q among them", ran, c)
						}
					}
					last := ran[len(ran)-1]
					if want := required[len(required)-1]; last != want {
						t.Errorf("the model's last command = %q; want %q", last, want)
					}
				})
			}
		}
	}

	t.Run("question", func(t *testing.T) {
		for _, ask := range []bool{true, false} {
			d := sample("plan")
			d.AskTool = ask
			text, err := s.Render(d)
			if err != nil {
				t.Fatal(err)
			}
			items := []followmodel.Item{user(text),
				{Role: followmodel.Assistant, Call: &followmodel.Call{ID: "1", Tool: "Bash", Command: "legion issue show web DEMO-1"}},
				{Role: followmodel.User, Result: &followmodel.Result{CallID: "1", Text: "DEMO-1  Pick a store\n\nQuestion: Which database? (postgres|sqlite)"}}}
			got := followmodel.Decide(followmodel.Transcript{Items: items, AskTool: "AskUserQuestion"}, followmodel.Traits{})
			want := followmodel.Decision{Action: followmodel.Ask, Question: "Which database? (postgres|sqlite)", Options: []string{"postgres", "sqlite"}}
			if !ask {
				want = followmodel.Decision{Action: followmodel.Say, Text: "Before I go on I need an answer to this question: Which database? (postgres|sqlite)"}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("AskTool %v: the model's answer to a question (-want +got):\n%s", ask, diff)
			}
		}
	})

	t.Run("second review", func(t *testing.T) {
		text, err := s.Render(sample("review"))
		if err != nil {
			t.Fatal(err)
		}
		first, _ := follow(t, []followmodel.Item{user(text)}, nil)
		var notes string
		for _, c := range first {
			if strings.Contains(c, "issue comment") {
				notes = c[strings.Index(c, `"`)+1 : len(c)-1]
			}
		}
		if !strings.Contains(first[len(first)-2], "worker-changes-requested") {
			t.Fatalf("the first review ran %q; want changes requested", first)
		}
		// A new conversation: the issue shows the first review's notes.
		show := "legion issue show web DEMO-1"
		shown := "DEMO-1  Add a greeting\nstatus: Needs Review\nlabels: \n\nreviewer (2026-11-29 03:00):\n" + notes + "\n"
		second, _ := follow(t, []followmodel.Item{user(text)}, map[string]string{show: shown})
		want := []string{
			show,
			"git diff main...HEAD",
			`legion issue comment web DEMO-1 "Review: Approved: the tests cover the change"`,
			"legion issue label web DEMO-1 worker-approved",
			"legion issue label web DEMO-1 worker-done",
		}
		if diff := cmp.Diff(want, second); diff != "" {
			t.Errorf("the second review's commands (-want +got):\n%s", diff)
		}
	})
}
