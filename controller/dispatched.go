package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/internal/atomicfile"
)

// A dispatch and its tracker changes are two steps (Apply: the dispatch
// first, so that a failed one leaves the issue as it was). A controller
// killed between them used to decide the issue again from its old labels
// and, when the dispatched worker had meanwhile completed its phase (a
// short phase, a controller restart of a second or two), to dispatch that
// phase once more. So Apply records each dispatch with its tracker changes
// before it starts the worker (Dispatched, one file per issue in the
// team's state directory) and forgets it once they are made; the next
// controller finishes the changes of a dispatch whose worker completed
// since (ActionFinishDispatch) instead of dispatching it again.

// Dispatch is the record of one dispatch whose tracker changes may not be
// made yet.
type Dispatch struct {
	Mode Mode      `json:"mode"`
	At   time.Time `json:"at"` // just before the worker was started
	// MoveTo and RemoveLabels are the dispatch's tracker changes that a
	// worker's own ones do not undo (worker-done, which the worker adds
	// when its phase is over, is never among them).
	MoveTo       Status   `json:"move_to,omitempty"`
	RemoveLabels []string `json:"remove_labels,omitempty"`
	// Before is the newest clean exit of a session in Mode that the
	// dispatch knew of (zero if none): a completion other than that one
	// is the dispatched worker's (CompletedBy).
	Before time.Time `json:"before,omitzero"`
}

// CompletedBy says whether a clean exit of a session in r's mode at is
// the dispatched worker's. Kubernetes says when a container ended to
// the second (metav1.Time), so a phase that completes within the second
// of its dispatch reads as ending before it: any exit from that second
// on counts, except the one the dispatch already knew of.
// (TestKubeTodoToDone, with its controller killed at the implementer's
// dispatch, ran the implementer a second time when it counted only
// exits after At.)
func (r Dispatch) CompletedBy(at time.Time) bool {
	return !at.IsZero() && !at.Equal(r.Before) && !at.Before(r.At.Truncate(time.Second))
}

// Dispatched keeps the records, one JSON file per issue under Dir. A
// corrupt one is quarantined (named in the error, and logged to Log when
// set) and counts as none.
type Dispatched struct {
	Dir string
	// Log, when set, gets a warning for each record quarantined: Collect
	// decides those issues from the tracker and goes on, so the log is
	// where a person learns a record was set aside.
	Log *slog.Logger
	mu  sync.Mutex
}

// recordName is the file of issue's record.
func (d *Dispatched) recordName(issue string) (string, error) {
	if issue == "" || strings.ContainsAny(issue, `/\`) || issue == "." || issue == ".." {
		return "", fmt.Errorf("dispatch record of issue %q: not a file name", issue)
	}
	return filepath.Join(d.Dir, issue+".json"), nil
}

// Record writes issue's record.
func (d *Dispatched) Record(issue string, r Dispatch) error {
	p, err := d.recordName(issue)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return fmt.Errorf("dispatch record of %s: %w", issue, err)
	}
	if err := atomicfile.WritePrivate(p, append(b, '\n')); err != nil {
		return fmt.Errorf("dispatch record of %s: %w", issue, err)
	}
	return nil
}

// Forget removes issue's record, if any.
func (d *Dispatched) Forget(issue string) error {
	p, err := d.recordName(issue)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dispatch record of %s: %w", issue, err)
	}
	return nil
}

// All returns the records by issue. Unreadable ones are quarantined and
// named in the error, which comes with the readable ones.
func (d *Dispatched) All(now time.Time) (map[string]Dispatch, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	entries, err := os.ReadDir(d.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch records: %w", err)
	}
	out := map[string]Dispatch{}
	var errs []error
	for _, e := range entries {
		issue, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(d.Dir, e.Name())
		b, err := os.ReadFile(p)
		var r Dispatch
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err == nil && (r.Mode == "" || r.At.IsZero()) {
			err = errors.New("want a mode and a time")
		}
		if err != nil {
			q, qerr := atomicfile.Quarantine(p, now)
			err = fmt.Errorf("dispatch record %s is unreadable (%w), quarantined as %s: its issue is decided from the tracker alone", p, errors.Join(err, qerr), q)
			if d.Log != nil {
				d.Log.Warn("a dispatch record was set aside", "issue", issue, "err", err)
			}
			errs = append(errs, err)
			continue
		}
		out[issue] = r
	}
	return out, errors.Join(errs...)
}

// dispatchRecord is what Apply records of decision d, a dispatch.
func dispatchRecord(d Decision, is Issue, now time.Time) Dispatch {
	return Dispatch{Mode: d.Mode, At: now, MoveTo: d.MoveTo, Before: is.Completed[d.Mode],
		RemoveLabels: slices.DeleteFunc(slices.Clone(d.RemoveLabels), func(l string) bool { return l == LabelWorkerDone })}
}
