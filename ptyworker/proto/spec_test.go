package proto_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/ptyworker/proto"
)

func TestSpecRoundTrip(t *testing.T) {
	s := testSpec(t, "claude", "--session-id", "x")
	s.ArgvResume = []string{"claude", "--resume", "x"}
	s.SessionFile = "/home/u/.claude/projects/-w/x.jsonl"
	s.StaleAfter = proto.Duration(10 * time.Minute)
	s.StartupGrace = proto.Duration(90 * time.Second)
	s.Env = []string{"A=1", "B=two words"}
	s.Prepare = [][]string{{"legion", "worktree", "clone", "https://example.com/r.git", "/legion/repo"}, {"/bin/true"}}
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := proto.WriteSpec(path, s); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("WriteSpec mode = %v; want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"stale_after": "10m0s"`) {
		t.Errorf("spec file does not write durations as strings:\n%s", b)
	}
	got, err := proto.ReadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("ReadSpec(WriteSpec(s)) mismatch (-want +got):\n%s", diff)
	}

	// A spec rewritten over one that others could read (which ReadSpec
	// refuses) is private again: the old file's mode is not kept.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := proto.WriteSpec(path, s); err != nil {
		t.Fatal(err)
	}
	if _, err := proto.ReadSpec(path); err != nil {
		t.Errorf("ReadSpec after WriteSpec over a 0644 spec: %v", err)
	}
}

func TestReadSpecRefuses(t *testing.T) {
	dir := t.TempDir()
	good := testSpec(t, "cat")
	write := func(name string, mode os.FileMode, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	ok := filepath.Join(dir, "ok.json")
	if err := proto.WriteSpec(ok, good); err != nil {
		t.Fatal(err)
	}
	okText, _ := os.ReadFile(ok)
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	// corrupt: the content was read and is not a spec (ErrCorruptSpec,
	// which the worker quarantines); the others were never read.
	tests := []struct {
		name, path, want string
		corrupt          bool
	}{
		{"group readable", write("g.json", 0o640, string(okText)), "mode 0640, want 0600", false},
		{"world readable", write("w.json", 0o644, string(okText)), "want 0600", false},
		{"symlink", link, "symbolic link", false},
		{"missing", filepath.Join(dir, "none.json"), "no such file", false},
		{"unknown field", write("u.json", 0o600, strings.Replace(string(okText), `"version"`, `"colour": 1, "version"`, 1)), `unknown field "colour"`, true},
		{"trailing data", write("t.json", 0o600, string(okText)+"{}"), "trailing data", true},
		{"not JSON", write("n.json", 0o600, "session_id = 1"), "decode", true},
		{"truncated", write("tr.json", 0o600, string(okText[:len(okText)/2])), "decode", true},
		{"bad field", write("b.json", 0o600, strings.Replace(string(okText), `"cwd": "`, `"cwd": "relative/`, 1)), "field cwd", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proto.ReadSpec(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadSpec(%s) = %v; want an error containing %q", tc.name, err, tc.want)
			}
			if got := errors.Is(err, proto.ErrCorruptSpec); got != tc.corrupt {
				t.Errorf("ReadSpec(%s) = %v: errors.Is(ErrCorruptSpec) = %v; want %v", tc.name, err, got, tc.corrupt)
			}
		})
	}
}

// TestQuarantineSpec: a corrupt spec is moved aside, named, not deleted.
func TestQuarantineSpec(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(p, []byte("{garbled"), 0o600); err != nil {
		t.Fatal(err)
	}
	q, err := proto.QuarantineSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(q, p+".corrupt-") {
		t.Errorf("QuarantineSpec(%s) = %s; want %s.corrupt-<time>", p, q, p)
	}
	if b, err := os.ReadFile(q); err != nil || string(b) != "{garbled" {
		t.Errorf("quarantined %s = %q, %v; want the bytes kept", q, b, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after QuarantineSpec: %v; want it gone", p, err)
	}
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(s *proto.Spec)
		field string // the error must name it; "" means valid
	}{
		{"valid", func(s *proto.Spec) {}, ""},
		{"version", func(s *proto.Spec) { s.Version = 2 }, "field version"},
		{"session id", func(s *proto.Spec) { s.SessionID = "abc" }, "field session_id"},
		{"name", func(s *proto.Spec) { s.Name = "" }, "field name"},
		{"control chars", func(s *proto.Spec) { s.Issue = "a\x1bb" }, "field issue"},
		{"team short", func(s *proto.Spec) { s.TeamShort = "ABCDEF12" }, "field team_short"},
		{"cwd", func(s *proto.Spec) { s.Cwd = "." }, "field cwd"},
		{"env", func(s *proto.Spec) { s.Env = []string{"NOEQUALS"} }, "field env"},
		{"argv_new", func(s *proto.Spec) { s.ArgvNew = nil }, "field argv_new"},
		{"argv_resume", func(s *proto.Spec) { s.ArgvResume = []string{""} }, "field argv_resume"},
		{"prepare empty", func(s *proto.Spec) { s.Prepare = [][]string{{"true"}, {}} }, "field prepare[1]: must hold a program"},
		{"prepare NUL", func(s *proto.Spec) { s.Prepare = [][]string{{"git", "a\x00b"}} }, "field prepare[0]: argument 1 holds a NUL byte"},
		{"prepare too many", func(s *proto.Spec) { s.Prepare = make([][]string, proto.MaxPrepare+1) }, "field prepare: 17 commands"},
		{"end_when_idle", func(s *proto.Spec) { s.EndWhenIdle = true }, "field end_when_idle"},
		{"own_commands", func(s *proto.Spec) { s.Agent = proto.AgentClaude; s.OwnCommands = []string{"sessions"} }, "field own_commands"},
		{"own_commands without hooks", func(s *proto.Spec) { s.OwnCommands = []string{api.OwnIssue} }, "field own_commands"},
		{"own_commands", func(s *proto.Spec) { s.Agent = proto.AgentClaude; s.OwnCommands = []string{api.OwnIssue, api.OwnState} }, ""},
		{"dialog_markers", func(s *proto.Spec) { s.Agent = proto.AgentClaude; s.DialogMarkers = []string{"suggest changes (esc)"} }, ""},
		{"dialog_markers without hooks", func(s *proto.Spec) { s.DialogMarkers = []string{"suggest changes (esc)"} }, "field dialog_markers"},
		{"dialog_markers empty line", func(s *proto.Spec) { s.Agent = proto.AgentClaude; s.DialogMarkers = []string{" "} }, "field dialog_markers"},
		{"dialog_markers two lines", func(s *proto.Spec) { s.Agent = proto.AgentClaude; s.DialogMarkers = []string{"a\nb"} }, "field dialog_markers"},
		{"legion relative", func(s *proto.Spec) { s.Legion = "bin/legion" }, "field legion"},
		{"session file relative", func(s *proto.Spec) { s.SessionFile = "x.jsonl"; s.StaleAfter = proto.Duration(time.Minute) }, "field session_file"},
		{"stale_after needed", func(s *proto.Spec) { s.SessionFile = "/x.jsonl" }, "field stale_after"},
		{"ring too small", func(s *proto.Spec) { s.RingSize = 100 }, "field ring_size"},
		{"half a size", func(s *proto.Spec) { s.Cols = 80 }, "field cols/rows"},
		{"short token", func(s *proto.Spec) { s.Token = "short" }, "field token"},
		{"daemon id", func(s *proto.Spec) { s.DaemonInstanceID = "" }, "field daemon_instance_id"},
		{"runtime dir", func(s *proto.Spec) { s.Paths.RuntimeDir = "run" }, "field paths.runtime_dir"},
		{"state dir", func(s *proto.Spec) { s.Paths.StateDir = "" }, "field paths.state_dir"},
		{"socket path too long", func(s *proto.Spec) { s.Paths.RuntimeDir = "/" + strings.Repeat("r", 90) }, "socket path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t, "cat")
			tc.edit(s)
			err := s.Validate()
			if tc.field == "" {
				if err != nil {
					t.Errorf("Validate() = %v; want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Validate() = %v; want an error naming %q", err, tc.field)
			}
		})
	}
}

func TestChooseArgv(t *testing.T) {
	s := testSpec(t, "new")
	s.ArgvResume = []string{"resume"}
	s.SessionFile = filepath.Join(t.TempDir(), "s.jsonl")
	s.StaleAfter = proto.Duration(time.Minute)
	if kind, argv := s.ChooseArgv(); kind != proto.ArgvNew || argv[0] != "new" {
		t.Errorf("ChooseArgv() without a session file = %s %v; want new", kind, argv)
	}
	os.WriteFile(s.SessionFile, nil, 0o600)
	if kind, argv := s.ChooseArgv(); kind != proto.ArgvResume || argv[0] != "resume" {
		t.Errorf("ChooseArgv() with a session file = %s %v; want resume", kind, argv)
	}
	s.ArgvResume = nil
	if kind, _ := s.ChooseArgv(); kind != proto.ArgvNew {
		t.Errorf("ChooseArgv() without a resume argv = %s; want new", kind)
	}
}

// TestChooseArgvClaude: Claude Code's session file is resumed only once
// it holds a user message. The lines it writes before that are those of
// a real session (claude-code-samples' question-answered.jsonl, up to its
// first user line); `claude --resume` of them says "No conversation
// found" and exits 1 (agent/claude FACTS F13a). The user message is found
// past a 64 KiB read, and across a read's edge.
func TestChooseArgvClaude(t *testing.T) {
	s := testSpec(t, "new")
	s.Agent = proto.AgentClaude
	s.ArgvResume = []string{"resume"}
	s.SessionFile = filepath.Join(t.TempDir(), "s.jsonl")
	s.StaleAfter = proto.Duration(time.Minute)
	s.ResumeMarker = claudecode.ResumeMarker
	before := `{"type":"mode","mode":"normal","sessionId":"u"}
{"type":"permission-mode","permissionMode":"bypassPermissions","sessionId":"u"}
{"type":"atis-latch","sessionId":"u"}
{"type":"file-history-snapshot","messageId":"m","snapshot":{"messageId":"m","trackedFileBackups":{},"timestamp":"2026-11-30T00:00:00Z"},"isSnapshotUpdate":false}
`
	user := `{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"Plan it"},"sessionId":"u"}` + "\n"
	quoted := `{"type":"attachment","content":"{\"type\":\"user\"}","sessionId":"u"}` + "\n"
	for _, tt := range []struct {
		name, file string
		want       string
	}{
		{"none", "-", proto.ArgvNew},
		{"empty", "", proto.ArgvNew},
		{"no message yet", before, proto.ArgvNew},
		{"a user message only quoted in a string", before + quoted, proto.ArgvNew},
		{"a user message", before + user, proto.ArgvResume},
		{"a user message after 64 KiB", before + strings.Repeat(" ", 64<<10-len(before)-3) + "\n" + user, proto.ArgvResume},
		{"a user message across a read's edge", before + strings.Repeat(" ", 64<<10-len(before)-strings.Index(user, `"type":"user"`)-6) + user, proto.ArgvResume},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(s.SessionFile)
			if tt.file != "-" {
				if err := os.WriteFile(s.SessionFile, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if kind, _ := s.ChooseArgv(); kind != tt.want {
				t.Errorf("ChooseArgv() = %s; want %s", kind, tt.want)
			}
			// A file the new start would find in its way (`claude
			// --session-id` refuses any file of its id) is moved aside,
			// kept whole; a resumable one stays.
			aside, err := s.SetAsideUnresumable(time.Now())
			_, statErr := os.Stat(s.SessionFile)
			switch {
			case err != nil:
				t.Errorf("SetAsideUnresumable: %v", err)
			case tt.want == proto.ArgvResume && (aside != "" || statErr != nil):
				t.Errorf("SetAsideUnresumable moved a resumable file to %q (%v); want it left", aside, statErr)
			case tt.want == proto.ArgvNew && tt.file != "-":
				b, rerr := os.ReadFile(aside)
				if statErr == nil || rerr != nil || string(b) != tt.file || !strings.Contains(aside, ".corrupt-") {
					t.Errorf("SetAsideUnresumable = %q (read: %v; session file still there: %v); want the file moved aside whole", aside, rerr, statErr == nil)
				}
			case aside != "":
				t.Errorf("SetAsideUnresumable = %q with no file; want nothing moved", aside)
			}
		})
	}
	// Without a marker a session file resumes as it is: Codex's history
	// (its hooks read as Claude Code's, so Agent is claude), Gemini's and
	// opencode's files hold no "type":"user". Before the marker was the
	// kind's, the clean-clone run of TestKinds/codex started its retro
	// anew, out of the implementer's conversation.
	s.ResumeMarker = ""
	codexHistory := `{"session_id":"u","ts":1764460000,"text":"# Legion: implement DEMO-1"}` + "\n"
	if err := os.WriteFile(s.SessionFile, []byte(codexHistory), 0o600); err != nil {
		t.Fatal(err)
	}
	if aside, err := s.SetAsideUnresumable(time.Now()); aside != "" || err != nil {
		t.Errorf("SetAsideUnresumable of a file without a marker to look for = %q, %v; want nothing moved", aside, err)
	}
	if kind, _ := s.ChooseArgv(); kind != proto.ArgvResume {
		t.Errorf("ChooseArgv() of Codex's history = %s; want %s", kind, proto.ArgvResume)
	}
}

// TestReadVolumeSpec: a spec in a Secret volume as a kubelet lays it out
// (spec.json -> ..data/spec.json, ..data -> ..<time>) is read, which
// ReadSpec refuses; a symlink out of the spec's directory is refused,
// naming where it led.
func TestReadVolumeSpec(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_11_30_01_30_00.123")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	s := testSpec(t, "/bin/true")
	if err := proto.WriteSpec(filepath.Join(data, "spec.json"), s); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "spec.json")
	if err := os.Symlink("..data/spec.json", path); err != nil {
		t.Fatal(err)
	}
	if _, err := proto.ReadSpec(path); err == nil {
		t.Error("ReadSpec followed the symlink; want it refused")
	}
	got, err := proto.ReadVolumeSpec(path)
	if err != nil {
		t.Fatalf("ReadVolumeSpec: %v", err)
	}
	if got.SessionID != s.SessionID {
		t.Errorf("ReadVolumeSpec read session %s; want %s", got.SessionID, s.SessionID)
	}

	outside := t.TempDir()
	if err := proto.WriteSpec(filepath.Join(outside, "spec.json"), s); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(dir, "escape.json")
	if err := os.Symlink(filepath.Join(outside, "spec.json"), escape); err != nil {
		t.Fatal(err)
	}
	if _, err := proto.ReadVolumeSpec(escape); err == nil || !strings.Contains(err.Error(), "outside its directory") {
		t.Errorf("ReadVolumeSpec of a symlink out of its directory = %v; want refused, saying so", err)
	}
}
