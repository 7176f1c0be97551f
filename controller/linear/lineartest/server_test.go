package lineartest

import (
	"testing"
	"time"
)

// TestBudgetLeaks: the fake's request budget refills as Linear's leaky
// bucket does. It never refilled before, and a chaos run of more than a
// few minutes spent it for good (Remaining 0 for the rest of the run).
func TestBudgetLeaks(t *testing.T) {
	t0 := time.Now()
	s := &Server{leaked: t0}
	var left int
	for range RequestsPerHour {
		left, _ = s.spend(t0)
	}
	if left != 0 {
		t.Fatalf("after %d requests at once: %d left; want 0", RequestsPerHour, left)
	}
	// Half an hour later half the budget is back (less this request).
	left, full := s.spend(t0.Add(30 * time.Minute))
	if want := RequestsPerHour/2 - 1; left < want-1 || left > want+1 {
		t.Errorf("half an hour later: %d left; want about %d", left, want)
	}
	if d := full.Sub(t0.Add(30 * time.Minute)); d < 29*time.Minute || d > 31*time.Minute {
		t.Errorf("whole again in %s; want about 30 minutes", d)
	}
	if left, _ := s.spend(t0.Add(3 * time.Hour)); left != RequestsPerHour-1 {
		t.Errorf("hours later: %d left; want the whole budget less this request", left)
	}
}
