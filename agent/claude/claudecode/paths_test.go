package claudecode

import (
	"testing"

	"github.com/google/uuid"
)

func TestSessionID(t *testing.T) {
	// Expected values from Python: uuid.uuid5(team, f"{issue}:{mode}").
	team := uuid.MustParse("0b8a1d2e-3c4f-4a5b-8c6d-7e8f90a1b2c3")
	tests := []struct {
		issue, mode string
		want        string
	}{
		{"ENG-21", "implement", "227d823e-000c-589c-88f2-f41d3949ab71"},
		{"DEMO-1", "plan", "a9047a69-2edc-5687-98aa-f46aacd6832d"},
	}
	for _, tt := range tests {
		if got := SessionID(team, tt.issue, tt.mode); got.String() != tt.want {
			t.Errorf("SessionID(%v, %q, %q) = %v; want %v", team, tt.issue, tt.mode, got, tt.want)
		}
	}
	if got, want := ControllerSessionID(team).String(), "e66b8b5d-dc79-5295-b323-1576418ddf96"; got != want {
		t.Errorf("ControllerSessionID(%v) = %v; want %v", team, got, want)
	}
	if SessionID(team, "DEMO-1", "plan") == SessionID(team, "DEMO-1", "implement") {
		t.Errorf("SessionID gives plan and implement the same ID")
	}
}

func TestEncodeProjectPath(t *testing.T) {
	// Long-path expectations come from Claude Code's function run in node.
	long := "/home/u/very-long-directory-name/very-long-directory-name/very-long-directory-name/very-long-directory-name/very-long-directory-name/very-long-directory-name/very-long-directory-name/very-long-directory-name/very-long-directory-name/very-long-directory-name/wörk😀"
	tests := []struct {
		name, cwd, want string
	}{
		{"plain", "/home/sami/legion/default", "-home-sami-legion-default"},
		{"dot", "/home/u/.dotfiles", "-home-u--dotfiles"},
		{"underscore space plus", "/home/u/my_project v2+x", "-home-u-my-project-v2-x"},
		{"case kept", "/Users/Foo/Bar", "-Users-Foo-Bar"},
		{"non-ascii per utf16 unit", "/tmp/é😀x", "-tmp----x"},
		{"empty", "", ""},
		{"exactly 200", "/" + repeat("a", 199), "-" + repeat("a", 199)},
		{"long ascii", "/" + repeat("a", 250), "-" + repeat("a", 199) + "-feo44x"},
		{"long non-ascii", long, "-home-u-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directo-ra79xm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EncodeProjectPath(tt.cwd); got != tt.want {
				t.Errorf("EncodeProjectPath(%q) = %q; want %q", tt.cwd, got, tt.want)
			}
		})
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}

func TestSessionFile(t *testing.T) {
	id := uuid.MustParse("227d823e-000c-589c-88f2-f41d3949ab71")
	got := SessionFile("/home/u", "/home/u/.dotfiles", id)
	want := "/home/u/.claude/projects/-home-u--dotfiles/227d823e-000c-589c-88f2-f41d3949ab71.jsonl"
	if got != want {
		t.Errorf("SessionFile = %q; want %q", got, want)
	}
	if got, want := SubagentDir(want), "/home/u/.claude/projects/-home-u--dotfiles/227d823e-000c-589c-88f2-f41d3949ab71/subagents"; got != want {
		t.Errorf("SubagentDir(%q) = %q; want %q", want, got, want)
	}
	if got, want := ProjectDir("/root", "/srv/x"), "/root/.claude/projects/-srv-x"; got != want {
		t.Errorf("ProjectDir = %q; want %q", got, want)
	}
}
