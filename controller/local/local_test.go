package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller"
)

// TestMain lets the test binary act as a second writer process.
func TestMain(m *testing.M) {
	if dir := os.Getenv("LEGION_LOCAL_WRITER_DIR"); dir != "" {
		n, _ := strconv.Atoi(os.Getenv("LEGION_LOCAL_WRITER_N"))
		s := Open(dir, "DEMO")
		for i := 0; i < n; i++ {
			if _, err := s.Add(context.Background(), fmt.Sprintf("from pid %d #%d", os.Getpid(), i)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestStoreLifecycle(t *testing.T) {
	ctx := t.Context()
	s := Open(t.TempDir(), "DEMO")
	if got, err := s.Issues(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Issues on a new store = %v, %v; want none, nil", got, err)
	}
	is, err := s.Add(ctx, "  Write the parser ")
	if err != nil {
		t.Fatal(err)
	}
	if is.ID != "DEMO-1" || is.Title != "Write the parser" || is.Status != controller.StatusTodo {
		t.Fatalf("Add = %+v; want DEMO-1 in Todo", is)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every write twice: the second changes nothing.
	for range 2 {
		must(s.AddLabel(ctx, "demo-1", controller.LabelWorkerDone))
		must(s.Move(ctx, "DEMO-1", controller.StatusInProgress))
	}
	must(s.RemoveLabel(ctx, "DEMO-1", "not-there"))
	must(s.CommentAs(ctx, "DEMO-1", "ana", "use postgres"))
	must(s.Comment(ctx, "DEMO-1", "noted"))

	got, err := s.Issue(ctx, "DEMO-1")
	must(err)
	if diff := cmp.Diff([]string{controller.LabelWorkerDone}, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got.Status != controller.StatusInProgress {
		t.Errorf("status = %q; want In Progress", got.Status)
	}
	if h := got.LatestHumanComment(); h != "use postgres" {
		t.Errorf("LatestHumanComment() = %q; want %q", h, "use postgres")
	}
	must(s.RemoveLabel(ctx, "DEMO-1", controller.LabelWorkerDone))
	got, _ = s.Issue(ctx, "DEMO-1")
	if len(got.Labels) != 0 {
		t.Errorf("labels after remove = %v; want none", got.Labels)
	}
}

func TestStoreBadInput(t *testing.T) {
	ctx := t.Context()
	s := Open(t.TempDir(), "DEMO")
	if _, err := s.Add(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"unknown issue", s.Move(ctx, "DEMO-9", controller.StatusDone), "DEMO-9: issue not found"},
		{"unknown status", s.Move(ctx, "DEMO-1", "Doing"), `unknown status "Doing"`},
		{"label with space", s.AddLabel(ctx, "DEMO-1", "a b"), `bad label "a b"`},
		{"empty comment", s.Comment(ctx, "DEMO-1", " "), "text is empty"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: error = %v; want it to contain %q", tt.name, tt.err, tt.want)
		}
	}
	if err := s.Move(ctx, "DEMO-9", controller.StatusDone); !errors.Is(err, controller.ErrIssueNotFound) {
		t.Errorf("Move(unknown) = %v; want ErrIssueNotFound", err)
	}
}

func TestStoreQuarantinesCorruptFile(t *testing.T) {
	dir := t.TempDir()
	s := Open(dir, "DEMO")
	corrupt := []byte(`{"version":1,"issues":[{"id":"DEMO-1"`)
	if err := os.WriteFile(s.Path(), corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.Issues(t.Context())
	if err == nil || !strings.Contains(err.Error(), s.Path()) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("Issues on a corrupt store = %v; want an error naming %s as corrupt", err, s.Path())
	}
	aside, _ := filepath.Glob(s.Path() + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("quarantined files = %v; want one", aside)
	}
	if kept, _ := os.ReadFile(aside[0]); string(kept) != string(corrupt) {
		t.Errorf("quarantined content = %q; want the original %q", kept, corrupt)
	}
}

// TestStoreConcurrentWriters runs real processes adding issues at once:
// every issue must land, each with its own identifier.
func TestStoreConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	const procs, each = 4, 25
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LEGION_LOCAL_WRITER_DIR="+dir, "LEGION_LOCAL_WRITER_N="+strconv.Itoa(each))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer %d: %v", c.Process.Pid, err)
		}
	}
	issues, err := Open(dir, "DEMO").Issues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, is := range issues {
		if seen[is.ID] {
			t.Errorf("identifier %s given twice", is.ID)
		}
		seen[is.ID] = true
	}
	if len(issues) != procs*each {
		t.Errorf("got %d issues; want %d", len(issues), procs*each)
	}
}

func TestStoreRefusesNewerStoreWithoutMovingIt(t *testing.T) {
	s := Open(t.TempDir(), "DEMO")
	for _, data := range []string{`{"version":2,"next":0,"issues":[]}`, `{"version":1,"next":0,"issues":[],"milestones":[]}`} {
		if err := os.WriteFile(s.Path(), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.Issues(t.Context())
		if err == nil || !strings.Contains(err.Error(), "upgrade legion") {
			t.Errorf("Issues on %s = %v; want a refusal saying to upgrade", data, err)
		}
		if kept, _ := os.ReadFile(s.Path()); string(kept) != data {
			t.Errorf("store changed or moved: %q", kept)
		}
	}
}

// TestNumberingGoesOnAfterQuarantine: after a corrupt store is moved aside,
// new issues are numbered past the ones it held, or DEMO-1 would be given
// again, with the old DEMO-1's session IDs, branch and worktree. Before,
// the fresh store started at DEMO-1.
func TestNumberingGoesOnAfterQuarantine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(data []byte) []byte
		want    string
	}{
		// Cut off mid-issue: the "next" field at the top survives.
		{"truncated", func(data []byte) []byte { return data[:len(data)*2/3] }, "DEMO-5"},
		// The top is garbage: the identifiers further down still count.
		{"head overwritten", func(data []byte) []byte {
			return append([]byte("<<<<<<< conflict\n"), data[bytes.Index(data, []byte(`"issues"`)):]...)
		}, "DEMO-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s := Open(t.TempDir(), "DEMO")
			for i := range 4 {
				if _, err := s.Add(ctx, fmt.Sprintf("issue %d", i+1)); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(s.Path())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.Path(), tc.corrupt(data), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Issues(ctx); err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("Issues on the corrupt store = %v; want it quarantined", err)
			}
			is, err := s.Add(ctx, "after the quarantine")
			if err != nil || is.ID != tc.want {
				t.Errorf("Add after the quarantine = %s, %v; want %s", is.ID, err, tc.want)
			}
			// The fresh store goes on from there by itself.
			if next, err := s.Add(ctx, "and one more"); err != nil || s.number(next.ID) != s.number(is.ID)+1 {
				t.Errorf("next Add = %s, %v; want the number after %s", next.ID, err, is.ID)
			}
		})
	}
}
