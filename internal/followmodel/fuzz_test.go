package followmodel

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzSteps: whatever the text, the extractor does not panic, every step
// has a non-empty command per alternative, and a model that runs what
// Decide says finishes: each answer runs the next step (a filled command
// counts as its step), and after every step it says it is done.
func FuzzSteps(f *testing.F) {
	for _, s := range []string{planText, reviewText, retroText, askText,
		"If a:\n" + sh("echo <a <b> c>") + "If b:\n" + sh("echo b"),
		sh("echo a\necho b") + "~~~sh\n<x>\n~~~\n", sh("echo <one> <two>") + sh("echo <one> <two>"),
		"  - If x:\n    ```sh\n    echo \"<why>\"\n    ```\n", "```sh\n```\n```sh\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		steps := Steps(text)
		for i, st := range steps {
			if len(st.Alternatives) == 0 {
				t.Fatalf("Steps(%q): step %d has no alternatives", text, i)
			}
			for _, a := range st.Alternatives {
				if a.Command == "" || a.Command != strings.TrimSpace(a.Command) {
					t.Fatalf("Steps(%q): step %d has command %q; want a trimmed, non-empty one", text, i, a.Command)
				}
				if filled := Fill(a.Command); !matches(a.Command, filled) {
					t.Fatalf("Fill(%q) = %q, which does not count as the step run", a.Command, filled)
				}
			}
		}
		items := []Item{{Role: User, Text: text}}
		for n := 0; ; n++ {
			d := Decide(Transcript{Items: items}, Traits{})
			if len(steps) == 0 {
				if d.Action != Say || !strings.HasPrefix(d.Text, NoInstructions) {
					t.Fatalf("Decide(no steps in %q) = %+v; want %q", text, d, NoInstructions)
				}
				return
			}
			if n == len(steps) {
				if d.Action != Say || !strings.HasPrefix(d.Text, "Done:") {
					t.Fatalf("Decide after all %d steps of %q = %+v; want the final text", n, text, d)
				}
				return
			}
			if d.Action != Run || d.Step != n+1 {
				t.Fatalf("Decide after %d steps of %q = %+v; want step %d run", n, text, d, n+1)
			}
			id := strconv.Itoa(n)
			items = append(items, Item{Role: Assistant, Call: &Call{ID: id, Tool: "Bash", Command: d.Command}},
				Item{Role: User, Result: &Result{CallID: id, Text: "ok"}})
		}
	})
}
