// Package local is Legion's embedded issue tracker: one JSON file per team
// under the state dir, so everything runs with no account anywhere. Writers
// in several processes (the controller, agents labelling issues through the
// CLI, a person) are serialised with an flock on a lock file beside it; every
// write is atomic (temp file + rename).
//
// A corrupt store is quarantined (renamed aside), never deleted or
// overwritten. Numbering goes on past every number the team used: a new
// issue's is above those in the store and in its quarantined copies, read
// as text, so a store started afresh after a quarantine does not give an
// identifier again (it would collide with the old issue's deterministic
// session IDs, branch and worktree).
package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// Store is the local tracker of one team.
type Store struct {
	path string // issues.json
	key  string // identifier prefix, e.g. "DEMO"
	now  func() time.Time
}

// store is the file's content.
type store struct {
	Version int                       `json:"version"`
	Next    int                       `json:"next"` // number of the next issue
	Issues  []controller.TrackedIssue `json:"issues"`
}

const storeVersion = 1

// Open returns the tracker stored in dir (created 0700 on first write) whose
// identifiers start with key (a team's issue_prefix, e.g. "DEMO").
func Open(dir, key string) *Store {
	return &Store{path: filepath.Join(dir, "issues.json"), key: key, now: time.Now}
}

// Path is the store file.
func (s *Store) Path() string { return s.path }

// Issues implements controller.Tracker.
func (s *Store) Issues(ctx context.Context) ([]controller.TrackedIssue, error) {
	var out []controller.TrackedIssue
	err := s.locked(ctx, false, func(st *store) error {
		out = st.Issues
		return nil
	})
	return out, err
}

// Issue returns one issue.
func (s *Store) Issue(ctx context.Context, id string) (controller.TrackedIssue, error) {
	var out controller.TrackedIssue
	err := s.locked(ctx, false, func(st *store) error {
		is, err := find(st, id)
		if err != nil {
			return err
		}
		out = *is
		return nil
	})
	return out, err
}

// Add creates an issue in Todo and returns it.
func (s *Store) Add(ctx context.Context, title string) (controller.TrackedIssue, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		return controller.TrackedIssue{}, errors.New("add issue: the title is empty")
	}
	var out controller.TrackedIssue
	err := s.locked(ctx, true, func(st *store) error {
		used, err := s.usedNumbers(st)
		if err != nil {
			return err
		}
		st.Next = max(st.Next, used) + 1
		out = controller.TrackedIssue{
			ID:     s.key + "-" + strconv.Itoa(st.Next),
			Title:  title,
			Status: controller.StatusTodo,
			Labels: []string{},
		}
		st.Issues = append(st.Issues, out)
		return nil
	})
	return out, err
}

// usedNumbers returns the highest issue number st and the store's
// quarantined copies (path.corrupt-*) hold or had given out. A quarantined
// file is corrupt, so it is searched as text for its "next" field and the
// team's identifiers: whatever part of it survived still counts.
func (s *Store) usedNumbers(st *store) (int, error) {
	used := st.Next
	for _, is := range st.Issues {
		used = max(used, s.number(is.ID))
	}
	aside, err := filepath.Glob(s.path + ".corrupt-*")
	if err != nil {
		return 0, fmt.Errorf("local tracker: %w", err)
	}
	ids := regexp.MustCompile(`(?i)(?:\b` + regexp.QuoteMeta(s.key) + `-|"next"\s*:\s*)([0-9]+)\b`)
	for _, p := range aside {
		data, err := os.ReadFile(p)
		if err != nil {
			return 0, fmt.Errorf("local tracker: read %s, a quarantined copy, to number new issues past its own: %w (make it readable, or remove it if it holds no issues)", p, err)
		}
		for _, m := range ids.FindAllSubmatch(data, -1) {
			if n, err := strconv.Atoi(string(m[1])); err == nil {
				used = max(used, n)
			}
		}
	}
	return used, nil
}

// number is the number of the team's identifier id ("DEMO-12" is 12), or 0.
func (s *Store) number(id string) int {
	rest, ok := strings.CutPrefix(strings.ToUpper(id), strings.ToUpper(s.key)+"-")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest)
	return n
}

// Move implements controller.Tracker.
func (s *Store) Move(ctx context.Context, id string, to controller.Status) error {
	if !knownStatus(to) {
		return fmt.Errorf("move %s: unknown status %q (want one of Todo, In Progress, Needs Review, Retro, Done, Backlog, Canceled)", id, to)
	}
	return s.update(ctx, id, func(is *controller.TrackedIssue) { is.Status = to })
}

// AddLabel implements controller.Tracker.
func (s *Store) AddLabel(ctx context.Context, id, label string) error {
	if err := checkLabel(label); err != nil {
		return fmt.Errorf("label %s: %w", id, err)
	}
	return s.update(ctx, id, func(is *controller.TrackedIssue) {
		if !slices.Contains(is.Labels, label) {
			is.Labels = append(is.Labels, label)
		}
	})
}

// RemoveLabel implements controller.Tracker.
func (s *Store) RemoveLabel(ctx context.Context, id, label string) error {
	return s.update(ctx, id, func(is *controller.TrackedIssue) {
		is.Labels = slices.DeleteFunc(is.Labels, func(l string) bool { return l == label })
	})
}

// Comment implements controller.Tracker; the comment's author is Legion.
func (s *Store) Comment(ctx context.Context, id, text string) error {
	return s.CommentAs(ctx, id, controller.AuthorLegion, text)
}

// CommentAs adds a comment by author (a person's name for comments made
// through `legion issue comment`).
func (s *Store) CommentAs(ctx context.Context, id, author, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("comment on %s: the text is empty", id)
	}
	return s.update(ctx, id, func(is *controller.TrackedIssue) {
		is.Comments = append(is.Comments, controller.Comment{Author: author, Text: text, Time: s.now().UTC()})
	})
}

func (s *Store) update(ctx context.Context, id string, f func(*controller.TrackedIssue)) error {
	return s.locked(ctx, true, func(st *store) error {
		is, err := find(st, id)
		if err != nil {
			return err
		}
		f(is)
		return nil
	})
}

func find(st *store, id string) (*controller.TrackedIssue, error) {
	for i := range st.Issues {
		if strings.EqualFold(st.Issues[i].ID, id) {
			return &st.Issues[i], nil
		}
	}
	return nil, fmt.Errorf("%s: %w", id, controller.ErrIssueNotFound)
}

func knownStatus(s controller.Status) bool {
	switch s {
	case controller.StatusTodo, controller.StatusInProgress, controller.StatusNeedsReview,
		controller.StatusRetro, controller.StatusDone, "Backlog", "Canceled":
		return true
	}
	return false
}

func checkLabel(l string) error {
	if l == "" || strings.ContainsFunc(l, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return fmt.Errorf("bad label %q: want a non-empty name without spaces", l)
	}
	return nil
}

// locked runs f on the store under an flock (shared for reads, exclusive for
// writes) and, for writes, saves the result atomically.
func (s *Store) locked(ctx context.Context, write bool, f func(*store) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if write {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("local tracker: %w", err)
		}
	}
	lock, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) && !write {
		return f(&store{Version: storeVersion})
	}
	if err != nil {
		return fmt.Errorf("local tracker: %w", err)
	}
	defer lock.Close()
	how := unix.LOCK_SH
	if write {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(lock.Fd()), how); err != nil {
		return fmt.Errorf("local tracker: lock %s: %w", lock.Name(), err)
	}
	st, err := s.load()
	if err != nil {
		return err
	}
	if err := f(st); err != nil || !write {
		return err
	}
	return s.save(st)
}

func (s *Store) load() (*store, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &store{Version: storeVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local tracker: %w", err)
	}
	// A store from a newer Legion is valid, just not ours to read or
	// rewrite: refuse it and leave it where it is.
	var head struct {
		Version int `json:"version"`
	}
	if json.Unmarshal(data, &head) == nil && head.Version > storeVersion {
		return nil, fmt.Errorf("local tracker %s has version %d, newer than this legion's %d: upgrade legion", s.path, head.Version, storeVersion)
	}
	var st store
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&st)
	if err != nil && strings.HasPrefix(err.Error(), "json: unknown field") {
		return nil, fmt.Errorf("local tracker %s: %w (written by a newer legion? upgrade legion)", s.path, err)
	}
	if err != nil || st.Version != storeVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", st.Version, storeVersion)
		}
		aside, rerr := atomicfile.Quarantine(s.path, s.now())
		if rerr != nil {
			return nil, fmt.Errorf("local tracker %s is corrupt (%v) and could not be moved aside: %w", s.path, err, rerr)
		}
		return nil, fmt.Errorf("local tracker %s is corrupt (%v); moved it to %s: repair it and move it back, or start afresh (new issues are numbered past those it held)", s.path, err, aside)
	}
	return &st, nil
}

func (s *Store) save(st *store) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("local tracker: %w", err)
	}
	if err := atomicfile.WritePrivate(s.path, append(data, '\n')); err != nil {
		return fmt.Errorf("local tracker: write %s: %w", s.path, err)
	}
	return nil
}

var _ controller.Tracker = (*Store)(nil)
