package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
)

// staticSessions stands in for the helper's sessions.list (measured on its
// own in package activation's benchmarks).
type staticSessions []controller.Session

func (s staticSessions) Sessions(context.Context) ([]controller.Session, error) { return s, nil }

// BenchmarkCollectDecide is one controller tick's state collection and
// decision for 1,000 issues in the local tracker and 100 live sessions
// (target: under 100 ms). Worktree status is left out: it costs a git
// status per worktree, measured by BenchmarkList in controller/workspace.
func BenchmarkCollectDecide(b *testing.B) {
	ctx := context.Background()
	tr := local.Open(b.TempDir(), "DEMO")
	statuses := []controller.Status{controller.StatusTodo, controller.StatusInProgress, controller.StatusNeedsReview, controller.StatusRetro, controller.StatusDone}
	var sessions staticSessions
	for i := range 1000 {
		is, err := tr.Add(ctx, fmt.Sprintf("issue %d", i))
		if err != nil {
			b.Fatal(err)
		}
		if err := tr.Move(ctx, is.ID, statuses[i%len(statuses)]); err != nil {
			b.Fatal(err)
		}
		if i%3 == 0 {
			if err := tr.AddLabel(ctx, is.ID, controller.LabelWorkerDone); err != nil {
				b.Fatal(err)
			}
		}
		if i < 100 {
			sessions = append(sessions, controller.Session{Name: is.ID + "-implement", Issue: is.ID, Mode: "implement", State: "running"})
		}
	}
	src := controller.Sources{Tracker: tr, Sessions: sessions, WIPLimit: 5}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		st, _, err := controller.Collect(ctx, src)
		if err != nil {
			b.Fatal(err)
		}
		if ds := controller.Decide(st); len(ds) != 1000 {
			b.Fatalf("%d decisions; want 1000", len(ds))
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/tick")
}
