package agenthost

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/notify/notifytest"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestRunAgentResumesItsSession hosts a scripted controller agent the way
// legion@TEAM does with controller = "agent": the first pass starts a new
// session, the next pass (after the cooldown) resumes the same one.
func TestRunAgentResumesItsSession(t *testing.T) {
	sdtest.Start(t) // a manager and a helper for the stop-or-restart check at the end
	startHelper(t)
	bin := sdtest.LegionBinary(t)
	ws := t.TempDir()
	if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	script := t.TempDir() + "/script"
	// No exit: like Claude Code, the agent waits at its prompt after its
	// turn, and its worker ends the pass (EndWhenIdle).
	if err := os.WriteFile(script, []byte("if-new say NEW-PASS $PROMPT\nif-resumed say RESUMED-PASS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ct := config.Team{
		Name: "ops", ID: uuid.MustParse("7e3f1c2a-9b8d-4e6f-a1b2-c3d4e5f60718"), Workspace: ws,
		Tracker: config.TrackerLocal, Controller: config.ControllerAgent,
		StaleAfter: time.Minute, RestartCooldown: 100 * time.Millisecond,
		Agent: config.Agent{
			New:    []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=" + script, bin, "scripted-agent", "--session-id", "{session_id}", "{prompt}"},
			Resume: []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=" + script, bin, "scripted-agent", "--resume", "{session_id}", "{prompt}"},
		},
	}
	state := t.TempDir()
	tm, err := team.Open(ct, "", state)
	if err != nil {
		t.Fatal(err)
	}
	tm.Legion = bin // the hooks' `legion hook`
	o := Options{
		Team: tm, Worker: config.Worker{StartupGrace: time.Minute},
		Home: os.Getenv("HOME"), RuntimeDir: os.Getenv("XDG_RUNTIME_DIR") + "/legion", StateDir: state,
		Log: nil,
	}
	spec, err := Spec(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()

	var transcript string
	err = waitfor.Until(60*time.Second, "a resumed pass", func() error {
		data, _ := os.ReadFile(spec.TranscriptPath())
		transcript = string(data)
		if !strings.Contains(transcript, "RESUMED-PASS") {
			return fmt.Errorf("transcript:\n%s", transcript)
		}
		return nil
	})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v; want nil after ctx ends (no stop job: workers left alone)", err)
	}
	if !strings.Contains(transcript, "NEW-PASS # Legion: controller (team ops)") {
		t.Errorf("the first pass was not a new session prompted with the controller skill; transcript:\n%s", transcript)
	}
	if _, err := os.Stat(spec.SessionFile); err != nil {
		t.Errorf("controller session file %s: %v", spec.SessionFile, err)
	}
	if !spec.EndWhenIdle || !strings.Contains(transcript, "completed: its turn ended") {
		t.Errorf("the first pass did not end when its turn did (EndWhenIdle %v); transcript:\n%s", spec.EndWhenIdle, transcript)
	}
}

// startHelper runs a helper in the test on its default socket until the
// test ends.
func startHelper(t *testing.T) {
	t.Helper()
	h, err := activation.New(activation.Options{Binary: sdtest.WorkerBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("helper Run = %v; want nil on cancel", err)
		}
	})
	socket, err := api.SocketPath()
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, 60*time.Second, "the helper to listen on "+socket, func() error {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// TestRunAnnouncesWaits: a team run by a controller agent announces what
// waits for a person as the auto controller's does: an issue the agent
// escalated (user-input-needed and its comment) reaches the team's
// webhook once, signed, however many times the host looks.
func TestRunAnnouncesWaits(t *testing.T) {
	sdtest.Start(t)
	startHelper(t)
	bin := sdtest.LegionBinary(t)
	ws := t.TempDir()
	if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	script := t.TempDir() + "/script"
	if err := os.WriteFile(script, []byte("say nothing to do\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ct := config.Team{
		Name: "ops", ID: uuid.MustParse("7e3f1c2a-9b8d-4e6f-a1b2-c3d4e5f60718"), Workspace: ws, IssuePrefix: "OPS",
		Tracker: config.TrackerLocal, Controller: config.ControllerAgent,
		StaleAfter: time.Minute, RestartCooldown: time.Hour,
		Agent: config.Agent{
			New:    []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=" + script, bin, "scripted-agent", "--session-id", "{session_id}", "{prompt}"},
			Resume: []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=" + script, bin, "scripted-agent", "--resume", "{session_id}", "{prompt}"},
		},
	}
	state := t.TempDir()
	tm, err := team.Open(ct, "", state)
	if err != nil {
		t.Fatal(err)
	}
	tm.Legion = bin
	store := tm.Tracker.(*local.Store)
	is, err := store.Add(t.Context(), "Pick a database")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CommentAs(t.Context(), is.ID, controller.AuthorLegion, "The plan agent asks: Postgres or SQLite?"); err != nil {
		t.Fatal(err)
	}
	if err := store.AddLabel(t.Context(), is.ID, controller.LabelInputNeeded); err != nil {
		t.Fatal(err)
	}
	hook := notifytest.NewWebhook(t, "s3cret")
	w, err := notify.NewWebhook(hook.URL, "s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(tm.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	n, err := notify.New(notify.Options{Team: tm.Name, Channels: []notify.Channel{w}, StatePath: notify.StatePath(tm.StateDir)})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Team: tm, Worker: config.Worker{StartupGrace: time.Minute},
		Home: os.Getenv("HOME"), RuntimeDir: os.Getenv("XDG_RUNTIME_DIR") + "/legion", StateDir: state,
		Notifier: n, WaitsEvery: 100 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	err = waitfor.Until(60*time.Second, "the escalation announced", func() error {
		if len(hook.Deliveries()) == 0 {
			return fmt.Errorf("no delivery (rejected: %v)", hook.Rejected())
		}
		return nil
	})
	time.Sleep(time.Second) // ten more looks: no second message
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	got := hook.Deliveries()
	if len(got) != 1 || len(got[0].Message.Waits) != 1 || got[0].Message.Waits[0].Issue != is.ID || !strings.Contains(got[0].Message.Waits[0].Asked, "Postgres or SQLite?") {
		t.Errorf("deliveries %+v; want one, of %s's escalation", got, is.ID)
	}
}
