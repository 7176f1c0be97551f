package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/config"
)

// InsertArgs returns argv, expanded from the template tmpl, with args
// inserted just before its session flag, so that a wrapper in front of the
// agent (`env VAR=x claude …`, `legion scripted-agent …`) keeps its own
// arguments: before the first argument that holds {session_id}, or before
// the flag in front of it when that argument is {session_id} alone
// ("--resume", "{session_id}"). Without {session_id} args go right after
// argv[0]. For the default templates that is right after "claude" either way.
func InsertArgs(tmpl, argv []string, args ...string) []string {
	at := 1
	for i, word := range tmpl {
		if !holdsSessionID(word) {
			continue
		}
		at = i
		if word == "{session_id}" && i > 1 && len(tmpl[i-1]) > 1 && tmpl[i-1][0] == '-' {
			at = i - 1
		}
		break
	}
	at = max(1, min(at, len(argv)))
	out := make([]string, 0, len(argv)+len(args))
	out = append(out, argv[:at]...)
	out = append(out, args...)
	return append(out, argv[at:]...)
}

// holdsSessionID reports whether the template word expands {session_id}
// (and not a literal "{{session_id}}").
func holdsSessionID(word string) bool {
	const marker = "\x00session\x00"
	out, err := config.Expand([]string{word}, config.Vars{SessionID: marker})
	if err != nil {
		return false
	}
	return strings.Contains(out[0], marker)
}

// physical is p with symlinks resolved, or p when that fails.
func Physical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// expand expands the team's agent.new and agent.resume with vars.
func Expand(a config.Agent, vars config.Vars) (argvNew, argvResume []string, err error) {
	if argvNew, err = config.Expand(a.New, vars); err != nil {
		return nil, nil, fmt.Errorf("agent.new: %w", err)
	}
	if argvResume, err = config.Expand(a.Resume, vars); err != nil {
		return nil, nil, fmt.Errorf("agent.resume: %w", err)
	}
	return argvNew, argvResume, nil
}

// ConversationHome is the agent home of a kind whose CLI keeps its state
// per conversation: "<kind>-<id>" beside the sessions' directories (dir's
// parent), shared by the sessions of one conversation.
func ConversationHome(dir, kind string, id uuid.UUID) string {
	return filepath.Join(filepath.Dir(dir), kind+"-"+id.String())
}

// FinishMode is the mode of the phase that merges and removes the
// worktree (controller.ModeFinish).
const FinishMode = "finish"

// LinkAuth makes link a symlink to auth when auth exists, and removes a
// link left from an earlier start when it does not.
func LinkAuth(auth, link string) error {
	if _, err := os.Stat(auth); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check %s: %w", auth, err)
		}
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", link, err)
		}
		return nil
	}
	if target, err := os.Readlink(link); err == nil && target == auth {
		return nil
	}
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(auth, tmp); err != nil {
		return fmt.Errorf("link %s: %w", auth, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return fmt.Errorf("link %s: %w", auth, err)
	}
	return nil
}
