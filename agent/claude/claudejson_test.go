package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
)

// userClaudeJSON is a ~/.claude.json with the user's own state, as Claude
// Code writes it (JSON.stringify with two spaces).
const userClaudeJSON = `{
  "numStartups": 42,
  "theme": "dark",
  "userID": "abc<&>def",
  "bigNumber": 123456789012345678901234567890,
  "projects": {
    "/home/me/other": {
      "allowedTools": [],
      "hasTrustDialogAccepted": false,
      "history": [{"display": "hi"}]
    },
    "@REPO@": {
      "allowedTools": ["Bash(ls)"],
      "lastCost": 1.5
    }
  },
  "customApiKeyResponses": {
    "approved": ["aaaaaaaaaaaaaaaaaaaa"],
    "rejected": ["ghijKLMNOPQRSTUVWXYZ", "bbbbbbbbbbbbbbbbbbbb"]
  },
  "hasSeenAutoDefaultNotice": true
}`

func TestWriteDialogAnswersKeepsTheUsersEntries(t *testing.T) {
	home, repo := t.TempDir(), t.TempDir()
	path := JSONPath(home)
	user := strings.ReplaceAll(userClaudeJSON, "@REPO@", repo)
	if err := os.WriteFile(path, []byte(user), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil { // past the umask
		t.Fatal(err)
	}
	key := "sk-ant-api03-0123456789abcdefghijKLMNOPQRSTUVWXYZ"
	if err := WriteDialogAnswers(t.Context(), home, repo, key); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	agenttest.FileMode(t, path, 0o640)
	want := strings.ReplaceAll(`{
  "numStartups": 42,
  "theme": "dark",
  "userID": "abc<&>def",
  "bigNumber": 123456789012345678901234567890,
  "projects": {
    "/home/me/other": {
      "allowedTools": [],
      "hasTrustDialogAccepted": false,
      "history": [
        {
          "display": "hi"
        }
      ]
    },
    "@REPO@": {
      "allowedTools": [
        "Bash(ls)"
      ],
      "lastCost": 1.5,
      "hasTrustDialogAccepted": true
    }
  },
  "customApiKeyResponses": {
    "approved": [
      "aaaaaaaaaaaaaaaaaaaa",
      "ghijKLMNOPQRSTUVWXYZ"
    ],
    "rejected": [
      "bbbbbbbbbbbbbbbbbbbb"
    ]
  },
  "hasSeenAutoDefaultNotice": true,
  "hasCompletedOnboarding": true,
  "hasSeenAutoDefaultNudge": true
}
`, "@REPO@", repo)
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("%s after WriteDialogAnswers (-want +got):\n%s", path, diff)
	}
	if bytes.Contains(data, []byte(key[:len(key)-20])) {
		t.Errorf("%s holds more of the API key than its last 20 characters", path)
	}

	// Every answer there: the file is not rewritten.
	before := inode(t, path)
	if err := WriteDialogAnswers(t.Context(), home, repo, key); err != nil {
		t.Fatal(err)
	}
	if after := inode(t, path); after != before {
		t.Errorf("WriteDialogAnswers replaced %s (inode %d, was %d) though every answer was there", path, after, before)
	}
}

func TestWriteDialogAnswersNewFile(t *testing.T) {
	home, repo := t.TempDir(), t.TempDir()
	if err := WriteDialogAnswers(t.Context(), home, repo, ""); err != nil {
		t.Fatal(err)
	}
	agenttest.FileMode(t, JSONPath(home), 0o600)
	agenttest.FileMode(t, JSONPath(home)+".legion-lock", 0o600)
	want := map[string]any{
		"hasCompletedOnboarding": true, "hasSeenAutoDefaultNotice": true, "hasSeenAutoDefaultNudge": true,
		"projects": map[string]any{agent.Physical(repo): map[string]any{"hasTrustDialogAccepted": true}},
	}
	if diff := cmp.Diff(want, readClaudeJSON(t, home)); diff != "" {
		t.Errorf("new ~/.claude.json without an API key (-want +got):\n%s", diff)
	}
}

// TestWriteDialogAnswersFollowsSymlink: a ~/.claude.json kept elsewhere
// (dotfiles) stays a link; its target gets the answers.
func TestWriteDialogAnswersFollowsSymlink(t *testing.T) {
	home, repo := t.TempDir(), t.TempDir()
	target := filepath.Join(t.TempDir(), "claude.json")
	if err := os.WriteFile(target, []byte(`{"theme":"light"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, JSONPath(home)); err != nil {
		t.Fatal(err)
	}
	if err := WriteDialogAnswers(t.Context(), home, repo, ""); err != nil {
		t.Fatal(err)
	}
	agenttest.FileMode(t, JSONPath(home), os.ModeSymlink|0o777)
	if m := readClaudeJSON(t, home); m["theme"] != "light" || m["hasCompletedOnboarding"] != true {
		t.Errorf("%s through its link = %v; want the theme kept and the answers added", target, m)
	}
}

func TestWriteDialogAnswersRefusesCorruptFile(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"truncated", `{"numStartups": 4, "projects": {"/a": {`, "invalid JSON at byte 39: unexpected end of JSON input"},
		{"not JSON", "# settings\n", "invalid JSON at byte 1: invalid character '#'"},
		{"array", `[{"hasCompletedOnboarding": true}]`, "want a JSON object, found an array"},
		{"two values", `{"a": 1} {"b": 2}`, "invalid JSON"},
		{"null", `null`, "want a JSON object, found null"},
		{"projects not an object", `{"projects": ["/a"]}`, `"projects" holds an array, want an object`},
		{"project not an object", `{"projects": {"@REPO@": true}}`, `projects: not Claude Code's JSON: "@REPO@" holds a boolean, want an object`},
		{"approved not strings", `{"customApiKeyResponses": {"approved": [1, 2]}}`, `"approved" holds an array, want an array of strings`},
		{"responses a string", `{"customApiKeyResponses": "yes"}`, `"customApiKeyResponses" holds a string, want an object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, repo := t.TempDir(), t.TempDir()
			path := JSONPath(home)
			data := strings.ReplaceAll(tt.data, "@REPO@", repo)
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			err := WriteDialogAnswers(t.Context(), home, repo, "sk-some-key-0123456789abcdefghij")
			if !errors.Is(err, ErrCorruptJSON) {
				t.Fatalf("WriteDialogAnswers(%s) = %v; want ErrCorruptClaudeJSON", tt.data, err)
			}
			if _, ok := errors.AsType[*api.PersonError](err); !ok || !strings.Contains(err.Error(), "`mv '"+path+"' '"+path+".corrupt-") {
				t.Errorf("WriteDialogAnswers(%s) = %v; want an api.PersonError (the controller escalates it) naming the move aside", tt.data, err)
			}
			want := strings.ReplaceAll(tt.want, "@REPO@", repo)
			if msg := err.Error(); !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, want) || !strings.Contains(msg, "leaves the file as it is") {
				t.Errorf("WriteDialogAnswers(%s) error = %q; want the file, %q and that it was left alone", tt.data, msg, want)
			}
			if got, _ := os.ReadFile(path); string(got) != data {
				t.Errorf("%s = %q after a refused merge; want it untouched", path, got)
			}
			if entries, _ := os.ReadDir(home); len(entries) != 2 { // the file and the lock
				t.Errorf("%s holds %d entries; want the file and its lock only (no temp, no copy)", home, len(entries))
			}
		})
	}
}

// TestWriteDialogAnswersTakesClaudesLock: while Claude Code holds its lock
// dir, Legion waits (here until its context ends) and leaves the file
// alone; once the lock is gone, or stale, Legion takes it and removes it
// after its write.
func TestWriteDialogAnswersTakesClaudesLock(t *testing.T) {
	home, repo := t.TempDir(), t.TempDir()
	lock := JSONPath(home) + ".lock"
	if err := os.Mkdir(lock, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := WriteDialogAnswers(ctx, home, repo, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteDialogAnswers while Claude Code holds %s = %v; want it to wait until its context ends", lock, err)
	}
	if _, err := os.Stat(JSONPath(home)); err == nil {
		t.Fatalf("WriteDialogAnswers wrote %s while Claude Code held its lock", JSONPath(home))
	}

	// A lock left by a holder that died (not touched for longer than
	// claudeLockStale) is taken over.
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	if err := WriteDialogAnswers(t.Context(), home, repo, ""); err != nil {
		t.Fatalf("WriteDialogAnswers with a stale lock: %v", err)
	}
	if m := readClaudeJSON(t, home); m["hasCompletedOnboarding"] != true {
		t.Errorf("~/.claude.json = %v; want the answers", m)
	}
	if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there after the write (%v); want it removed", lock, err)
	}
}

// childEnv makes the test binary a writer of dialog answers
// (TestDialogAnswersChild) instead of running the tests.
const childEnv = "LEGION_AGENT_TEST_CHILD"

// TestWriteDialogAnswersConcurrent: many writers, goroutines of this
// process and other processes, each trusting repositories of its own in
// one shared ~/.claude.json: none of the answers is lost (the flock), and
// the user's entries stay.
func TestWriteDialogAnswersConcurrent(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(JSONPath(home), []byte(`{"theme":"dark","projects":{"/keep":{"x":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const goroutines, procs, each = 8, 4, 5
	var repos []string
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each+procs)
	for g := range goroutines {
		for i := range each {
			repos = append(repos, fmt.Sprintf("/repos/g%d-%d", g, i))
		}
		wg.Go(func() {
			for i := range each {
				errs <- WriteDialogAnswers(t.Context(), home, fmt.Sprintf("/repos/g%d-%d", g, i), "")
			}
		})
	}
	for p := range procs {
		for i := range each {
			repos = append(repos, fmt.Sprintf("/repos/p%d-%d", p, i))
		}
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDialogAnswersChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+home, "CHILD_PREFIX=/repos/p"+strconv.Itoa(p), "CHILD_COUNT="+strconv.Itoa(each))
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("child %d: %v\n%s", p, err, out)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	m := readClaudeJSON(t, home)
	projects, _ := m["projects"].(map[string]any)
	for _, r := range repos {
		if p, _ := projects[r].(map[string]any); p["hasTrustDialogAccepted"] != true {
			t.Errorf("projects[%s] = %v; want it trusted (an answer was lost)", r, projects[r])
		}
	}
	if m["theme"] != "dark" || projects["/keep"] == nil {
		t.Errorf("~/.claude.json = %v; want the user's theme and project kept", m)
	}
	if len(projects) != len(repos)+1 {
		t.Errorf("%d projects; want %d", len(projects), len(repos)+1)
	}
}

// TestDialogAnswersChild is the other process of
// TestWriteDialogAnswersConcurrent; it does nothing in a normal run.
func TestDialogAnswersChild(t *testing.T) {
	home := os.Getenv(childEnv)
	if home == "" {
		t.Skip("only run as a child of TestWriteDialogAnswersConcurrent")
	}
	n, _ := strconv.Atoi(os.Getenv("CHILD_COUNT"))
	for i := range n {
		if err := WriteDialogAnswers(t.Context(), home, fmt.Sprintf("%s-%d", os.Getenv("CHILD_PREFIX"), i), ""); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzMergeDialogAnswers: whatever ~/.claude.json holds, the merge either
// refuses it as corrupt or gives a JSON object with the answers and every
// other entry of the input unchanged.
func FuzzMergeDialogAnswers(f *testing.F) {
	f.Add([]byte(strings.ReplaceAll(userClaudeJSON, "@REPO@", "/repo")), "ghijKLMNOPQRSTUVWXYZ")
	f.Add([]byte(`{}`), "")
	f.Add([]byte(``), "k")
	f.Add([]byte(`{"projects":null,"customApiKeyResponses":{"approved":null}}`), "k")
	f.Add([]byte(`{"a":1,"a":2,"projects":{"/repo":{"hasTrustDialogAccepted":true}}}`), "")
	f.Add([]byte(`{"projects":{"/repo":[]}}`), "")
	f.Add([]byte("{\"\xff\":\"\\ud800\"}"), "")
	f.Fuzz(func(t *testing.T, data []byte, suffix string) {
		if !utf8.ValidString(suffix) {
			return // API keys are ASCII
		}
		out, changed, err := mergeDialogAnswers(data, "/repo", suffix)
		if err != nil {
			if !errors.Is(err, ErrCorruptJSON) {
				t.Fatalf("merge(%q) = %v; want ErrCorruptClaudeJSON or success", data, err)
			}
			return
		}
		if !changed && !bytes.Equal(out, data) {
			t.Fatalf("merge(%q) changed nothing but returned %q", data, out)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("merge(%q) = %q: not a JSON object: %v", data, out, err)
		}
		for _, k := range []string{"hasCompletedOnboarding", "hasSeenAutoDefaultNotice", "hasSeenAutoDefaultNudge"} {
			if got[k] != true {
				t.Fatalf("merge(%q) = %q: %s is not true", data, out, k)
			}
		}
		project, _ := got["projects"].(map[string]any)["/repo"].(map[string]any)
		if project["hasTrustDialogAccepted"] != true {
			t.Fatalf("merge(%q) = %q: /repo is not trusted", data, out)
		}
		if suffix != "" {
			approved, _ := got["customApiKeyResponses"].(map[string]any)["approved"].([]any)
			if !containsAny(approved, suffix) {
				t.Fatalf("merge(%q, %q) = %q: the key is not approved", data, suffix, out)
			}
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return
		}
		var in map[string]any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatalf("merge accepted %q, which encoding/json refuses: %v", data, err)
		}
		for k, v := range in {
			switch k {
			case "hasCompletedOnboarding", "hasSeenAutoDefaultNotice", "hasSeenAutoDefaultNudge", "customApiKeyResponses":
				continue
			case "projects":
				inProjects, _ := v.(map[string]any)
				for p, pv := range inProjects {
					if p == "/repo" {
						continue
					}
					if !cmp.Equal(pv, got["projects"].(map[string]any)[p]) {
						t.Fatalf("merge(%q) = %q: projects[%q] changed", data, out, p)
					}
				}
				continue
			}
			if !cmp.Equal(v, got[k]) {
				t.Fatalf("merge(%q) = %q: %q changed from %v to %v", data, out, k, v, got[k])
			}
		}
	})
}

func containsAny(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
