package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// JSONPath is Claude Code's own state file in home, ~/.claude.json. It
// holds a few answers that Claude Code reads from nowhere else.
func JSONPath(home string) string { return filepath.Join(home, ".claude.json") }

// lockSuffix names the lock file beside ~/.claude.json that Legion's
// writers take (flock, exclusive) around a read-modify-write.
const lockSuffix = ".legion-lock"

// Claude Code's own lock of ~/.claude.json is a directory beside it,
// created with mkdir (the proper-lockfile protocol: a lock whose mtime is
// older than claudeLockStale was left by a dead holder and may be taken
// over). Claude Code takes it around each of its own writes, which read
// the file again, merge and rename a temp file over it (2.1.330, seen with
// strace): holding it too keeps Claude Code's writes and Legion's apart.
const (
	claudeLockSuffix = ".lock"
	claudeLockStale  = 10 * time.Second
	// claudeLockWait bounds the wait for a fresh lock: Claude Code holds
	// it for one small write.
	claudeLockWait = 30 * time.Second
)

// ErrCorruptJSON is wrapped by WriteDialogAnswers' error when
// ~/.claude.json is not a JSON object, or one of the entries Legion sets is
// of another type than Claude Code writes. The file is left untouched.
var ErrCorruptJSON = errors.New("not Claude Code's JSON")

// WriteDialogAnswers records in home's ~/.claude.json the answers to the
// dialogs a new worktree of repo would stop at:
//
//   - hasCompletedOnboarding: offline, onboarding's connectivity check
//     fails and the CLI exits;
//   - projects[repo].hasTrustDialogAccepted, for repo's physical path:
//     trust in a repository's main checkout covers its git worktrees
//     wherever they are (the folder trust dialog's default is "No, exit");
//   - hasSeenAutoDefaultNotice and hasSeenAutoDefaultNudge: the auto-mode
//     banner and nudge;
//   - when apiKey (ANTHROPIC_API_KEY of the agent) is set, its last 20
//     characters in customApiKeyResponses.approved (and no longer in
//     rejected): the "Detected a custom API key" dialog. Claude Code keeps
//     the same suffix there itself; the key is stored nowhere else.
//
// It is the user's file, shared by every agent and by the running Claude
// Code CLIs, which rewrite it: it is read, changed and replaced atomically
// (its mode kept, 0600 for a new one) under an exclusive flock on
// ~/.claude.json.legion-lock (Legion's writers) and Claude Code's own lock
// (the directory ~/.claude.json.lock, taken as Claude Code takes it), and
// every other key stays as it was (in its order, with its value as
// written). A symlinked
// ~/.claude.json is followed and its target replaced. Nothing is written
// when every answer is there already. A file that is not a JSON object,
// or holds one of these entries with another type, is refused
// (ErrCorruptJSON, naming the file, in an api.PersonError) and left as it
// is: it is the user's, and Claude Code restores it from its own backups
// (~/.claude/backups) when it has one. Without one Claude Code does not
// start either, so a person repairs it or moves it aside.
func WriteDialogAnswers(ctx context.Context, home, repo, apiKey string) error {
	path := JSONPath(home)
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	unlock, err := lockFile(ctx, path+lockSuffix)
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer unlock()
	unlockClaude, err := lockClaude(ctx, path+claudeLockSuffix)
	if err != nil {
		return fmt.Errorf("lock %s as Claude Code does: %w", path, err)
	}
	defer unlockClaude()

	data, err := os.ReadFile(path)
	perm := os.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		perm = fi.Mode().Perm()
	}
	out, changed, err := mergeDialogAnswers(data, agent.Physical(repo), apiKeySuffix(apiKey))
	if err != nil {
		// Claude Code itself does not start on it (without a backup of
		// its own it says so and exits 1: FACTS F13b), so no agent of
		// this home starts until a person acts.
		aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z")
		return &api.PersonError{Err: fmt.Errorf("%s: %w; Legion leaves the file as it is, and Claude Code does not start on it: repair it, "+
			"or move it aside to start with Claude Code's default settings (`mv '%s' '%s'`; a claude.ai login is then asked for again)", path, err, path, aside)}
	}
	if !changed {
		return nil
	}
	if err := atomicfile.Write(path, out, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// apiKeySuffix is what Claude Code remembers of a custom API key: its
// last 20 characters (all of a shorter key); "" for none.
func apiKeySuffix(key string) string {
	r := []rune(key)
	return string(r[max(0, len(r)-20):])
}

// lockFile takes an exclusive flock on path (created 0600), waiting for
// it; the returned func releases it. Waiting ends early when ctx does.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the only descriptor releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, err
		}
		if err := waitLock(ctx); err != nil {
			f.Close()
			return nil, err
		}
	}
}

// lockPoll is how often lockFile tries again for a lock another writer
// holds; writers hold it for a read and a write of one small file.
const lockPoll = 5 * time.Millisecond

func waitLock(ctx context.Context) error {
	t := time.NewTimer(lockPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lockClaude takes Claude Code's lock dir: it makes it, or takes it over
// when its holder left it stale, waiting while a live holder has it (at
// most claudeLockWait, or until ctx ends). The returned func removes it.
func lockClaude(ctx context.Context, dir string) (unlock func(), err error) {
	deadline := time.Now().Add(claudeLockWait)
	for {
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return func() { os.Remove(dir) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) > claudeLockStale {
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("take over the stale lock %s: %w", dir, err)
			}
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s has been held for over %v", dir, claudeLockWait)
		}
		if err := waitLock(ctx); err != nil {
			return nil, err
		}
	}
}

// mergeDialogAnswers returns data, the contents of ~/.claude.json (nil or
// blank: none yet), with the answers set, and whether that changed
// anything.
func mergeDialogAnswers(data []byte, repo, keySuffix string) ([]byte, bool, error) {
	root := &object{}
	if len(bytes.TrimSpace(data)) > 0 {
		var err error
		if root, err = parseObject(data); err != nil {
			return nil, false, err
		}
	}
	changed := false
	for _, k := range []string{"hasCompletedOnboarding", "hasSeenAutoDefaultNotice", "hasSeenAutoDefaultNudge"} {
		changed = root.set(k, jsonTrue) || changed
	}

	projects, err := root.child("projects")
	if err != nil {
		return nil, false, err
	}
	project, err := projects.child(repo)
	if err != nil {
		return nil, false, fmt.Errorf("projects: %w", err)
	}
	if project.set("hasTrustDialogAccepted", jsonTrue) {
		changed = true
		projects.set(repo, project.marshal())
		root.set("projects", projects.marshal())
	}

	if keySuffix != "" {
		responses, err := root.child("customApiKeyResponses")
		if err != nil {
			return nil, false, err
		}
		approved, err := responses.strings("approved")
		if err != nil {
			return nil, false, fmt.Errorf("customApiKeyResponses: %w", err)
		}
		rejected, err := responses.strings("rejected")
		if err != nil {
			return nil, false, fmt.Errorf("customApiKeyResponses: %w", err)
		}
		c := false
		if !slices.Contains(approved, keySuffix) {
			c = responses.set("approved", mustJSON(append(approved, keySuffix)))
		}
		if !responses.has("rejected") || slices.Contains(rejected, keySuffix) {
			c = responses.set("rejected", mustJSON(slices.DeleteFunc(rejected, func(s string) bool { return s == keySuffix }))) || c
		}
		if c {
			changed = true
			root.set("customApiKeyResponses", responses.marshal())
		}
	}
	if !changed {
		return data, false, nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, root.marshal(), "", "  "); err != nil {
		return nil, false, err // cannot happen: every value was valid JSON
	}
	out.WriteByte('\n')
	return out.Bytes(), true, nil
}

var jsonTrue = json.RawMessage("true")

// mustJSON encodes a []string, with no HTML escaping (Claude Code's
// JSON.stringify escapes no "<", ">" or "&" either).
func mustJSON(v []string) json.RawMessage {
	if v == nil {
		v = []string{}
	}
	return encodeNoHTML(v)
}

func mustJSONString(s string) json.RawMessage { return encodeNoHTML(s) }

func encodeNoHTML(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // strings and slices of them always encode
	}
	return bytes.TrimSpace(b.Bytes())
}

// object is a JSON object whose keys keep their order and whose values
// stay as written.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject parses data as one JSON object. A key given twice keeps its
// first place and its last value, as JavaScript's JSON.parse does.
func parseObject(data []byte) (*object, error) {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, fmt.Errorf("%w: invalid JSON at byte %d: %v", ErrCorruptJSON, se.Offset, err)
		}
		return nil, fmt.Errorf("%w: invalid JSON: %v", ErrCorruptJSON, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("%w: want a JSON object, found %s", ErrCorruptJSON, kindOf(data))
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptJSON, err)
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptJSON, err)
		}
		o.set(k, v)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("%w: %v", ErrCorruptJSON, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrCorruptJSON)
	}
	return o, nil
}

// kindOf names the JSON value data holds, for errors.
func kindOf(data []byte) string {
	switch b := bytes.TrimSpace(data); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '[':
		return "an array"
	case b[0] == '"':
		return "a string"
	case bytes.Equal(b, []byte("null")):
		return "null"
	case bytes.Equal(b, []byte("true")), bytes.Equal(b, []byte("false")):
		return "a boolean"
	}
	return "a number"
}

// set sets key to v, reporting whether that changed the object (a value
// that is the same JSON, whitespace aside, is no change).
func (o *object) set(key string, v json.RawMessage) bool {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	old, ok := o.vals[key]
	if !ok {
		o.keys = append(o.keys, key)
	} else if sameJSON(old, v) {
		return false
	}
	o.vals[key] = v
	return true
}

func (o *object) has(key string) bool { _, ok := o.vals[key]; return ok }

// child is the object at key: empty when key is missing or null, an error
// naming key when it holds something else.
func (o *object) child(key string) (*object, error) {
	v, ok := o.vals[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return &object{}, nil
	}
	c, err := parseObject(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %q holds %s, want an object", ErrCorruptJSON, key, kindOf(v))
	}
	return c, nil
}

// strings is the array of strings at key (nil when missing or null).
func (o *object) strings(key string) ([]string, error) {
	v, ok := o.vals[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, nil
	}
	var s []string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fmt.Errorf("%w: %q holds %s, want an array of strings", ErrCorruptJSON, key, kindOf(v))
	}
	return s, nil
}

// marshal encodes the object compactly, keys in order.
func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mustJSONString(k))
		b.WriteByte(':')
		if err := json.Compact(&b, o.vals[k]); err != nil {
			b.Write(o.vals[k]) // valid already: parsed or built here
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// sameJSON reports whether a and b are the same JSON text but for
// whitespace.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
