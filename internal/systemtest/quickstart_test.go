package systemtest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units/sdtest"
)

// readmeQuickStart returns the commands of the README's "Quick start for
// real use" code block (the indented block under that heading), each
// without its trailing comment.
func readmeQuickStart(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in, inBlock := false, false
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Quick start for real use"
			inBlock = false
		case !in:
		case strings.HasPrefix(line, "    "):
			inBlock = true
			cmd, _, _ := strings.Cut(line, " #")
			cmds = append(cmds, strings.TrimSpace(cmd))
		case inBlock: // the block's end
			in = false
		}
	}
	if len(cmds) == 0 {
		t.Fatal(`README.md has no code block under "## Quick start for real use"`)
	}
	return cmds
}

// quickStartPlan keeps the planner working at its prompt, so that the
// quick start's session commands have a live session to show.
const quickStartPlan = `
if-env LEGION_MODE=plan say Planning $LEGION_ISSUE
if-env LEGION_MODE=plan work 30m
`

// attachScript runs `legion attach $1` in a terminal (script(1)) and
// types the detach key once the output shows $2.
const attachScript = `dir=$(mktemp -d); mkfifo "$dir/in"
script -qefc "legion attach $1" "$dir/out" <"$dir/in" >/dev/null & pid=$!
exec 3>"$dir/in"
until grep -q "$2" "$dir/out" 2>/dev/null; do sleep 0.1; done
printf '\034' >&3
wait $pid
cat "$dir/out"; rm -r "$dir"`

// TestQuickStart runs the README's quick start, line by line, as an
// ordinary user with lingering, each line in a login session of its own,
// on a machine where the user has a repository ~/src/web and Claude Code
// (the scripted agent). Lines that cannot run literally say why and run
// the nearest thing; a line this test does not know fails it, so a change
// of the README's quick start must come with a change here.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	cmds := readmeQuickStart(t)
	root := moduleRoot(t)
	goTool, err := exec.LookPath("go")
	sdtest.Require(t, "the go tool in PATH (the quick start's first line builds Legion)", err == nil)
	s := bootLegion(t, options{noBinaries: true, linger: true, script: quickStartPlan})
	issue := prefix + "-1"
	var short string
	for _, line := range cmds {
		t.Logf("$ %s", line)
		var out string
		switch line {
		case "make build && sudo make install PREFIX=/usr":
			// Not literally: the user has no sudo here, and a build as the
			// user would start from an empty Go cache. As root, in a copy
			// of the source tree (the host's may be below /tmp, which is a
			// tmpfs of the container's own), with the host's Go and its
			// warm cache.
			src := copySourceTree(t, s, root)
			out = s.root("sh", "-ec", `cd "$1" && PATH="$2:$PATH" make build && PATH="$2:$PATH" make install PREFIX=/usr`, "make", src, filepath.Dir(goTool))
		case "legion team add web --workspace ~/src/web":
			out = s.login("bash", "-c", line)
			// Not in the quick start: an issue, so that its sessions
			// commands show a live session.
			s.login("legion", "issue", "add", teamName, "Write a file")
			short = teamShort(t, s)
		case "journalctl --user -u legion@web -f":
			// Not literally: -f follows until interrupted. Without it, once
			// the controller has started a worker.
			s.workerUnit(issue, controller.ModePlan)
			out = s.login("journalctl", "--user", "-u", "legion@"+teamName, "--no-pager")
			if !strings.Contains(out, issue) {
				t.Errorf("journalctl --user -u legion@web says nothing of %s:\n%s", issue, out)
			}
		case "legion state web":
			out = s.login("bash", "-c", line)
			if !strings.Contains(out, issue) {
				t.Errorf("%s does not show %s:\n%s", line, issue, out)
			}
		case "legion sessions list":
			s.workerUnit(issue, controller.ModePlan)
			out = s.login("bash", "-c", line)
			if !strings.Contains(out, issue+"-plan") {
				t.Errorf("%s does not show %s-plan:\n%s", line, issue, out)
			}
		case "legion attach DEMO-1-implement":
			// Not literally: DEMO-1-implement is the README's example; the
			// live session here is the planner's, and attach needs a
			// terminal: script(1) gives it one, and the detach key (Ctrl-\)
			// is typed once the agent's screen has shown.
			out = s.login("timeout", "120", "sh", "-ec", attachScript, "attach", issue+"-plan", "Planning "+issue)
			if !strings.Contains(out, "Planning "+issue) {
				t.Errorf("legion attach %s-plan did not show the agent's screen:\n%s", issue, out)
			}
		case "legion tmux web && tmux attach -t legion-<short>":
			// Not literally: tmux attach needs a terminal. The session
			// exists and gets a window for the live agent.
			out = s.login("legion", "tmux", teamName)
			s.until("a tmux window for "+issue+"-plan", func() error {
				w, err := s.asUser("tmux", "list-windows", "-t", "legion-"+short, "-F", "#W")
				if err != nil {
					return err
				}
				if !strings.Contains(w, issue+"-plan") {
					return fmt.Errorf("windows of legion-%s: %q", short, w)
				}
				return nil
			})
		default:
			out = s.login("bash", "-c", line)
		}
		t.Logf("%s", out)
	}
}

// teamShort is the short ID of the team.
func teamShort(t *testing.T, s *sys) string {
	t.Helper()
	var teams []struct {
		Name    string `json:"name"`
		ShortID string `json:"short_id"`
	}
	if err := json.Unmarshal([]byte(s.login("legion", "team", "list", "--json")), &teams); err != nil {
		t.Fatal(err)
	}
	for _, tm := range teams {
		if tm.Name == teamName {
			return tm.ShortID
		}
	}
	t.Fatalf("legion team list --json has no team %s", teamName)
	return ""
}

// copySourceTree copies the source tree root into the container, at
// /usr/src/legion, and returns that path.
func copySourceTree(t *testing.T, s *sys, root string) string {
	t.Helper()
	const src = "/usr/src/legion"
	dst := s.Path(src)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", root+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy the source tree %s into the container: %v: %s", root, err, out)
	}
	return src
}

// moduleRoot is the source tree: the test runs in its package's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return dir
}
