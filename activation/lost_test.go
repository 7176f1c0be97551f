package activation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestCutByReboot: the rule that tells a `legion spawn` session a reboot
// cut from one that ended by itself, was ended by a person, or belongs
// to a team's controller.
func TestCutByReboot(t *testing.T) {
	const thisBoot, earlier = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	entry := func(role, state, boot string) *proto.Registry {
		return &proto.Registry{Role: role, State: state, Owner: proto.Lease{PID: 1, BootID: boot}}
	}
	for _, tt := range []struct {
		name string
		r    *proto.Registry
		boot string
		want bool
	}{
		{"running in an earlier boot (power cut)", entry(roleCommand, proto.StateRunning, earlier), thisBoot, true},
		{"starting in an earlier boot", entry(roleCommand, proto.StateStarting, earlier), thisBoot, true},
		{"stopped in an earlier boot (shutdown)", entry(roleCommand, proto.StateStopped, earlier), thisBoot, true},
		{"exited by itself before the reboot", entry(roleCommand, proto.StateExited, earlier), thisBoot, false},
		{"killed by a person before the reboot", entry(roleCommand, proto.StateRemoved, earlier), thisBoot, false},
		{"completed before the reboot", entry(roleCommand, proto.StateCompleted, earlier), thisBoot, false},
		{"crashed in this boot", entry(roleCommand, proto.StateRunning, thisBoot), thisBoot, false},
		{"stopped in this boot", entry(roleCommand, proto.StateStopped, thisBoot), thisBoot, false},
		{"a team's worker (its controller resumes it)", entry(roleWorker, proto.StateRunning, earlier), thisBoot, false},
		{"a worker older than the boot ID", entry(roleCommand, proto.StateRunning, ""), thisBoot, false},
		{"this boot unknown", entry(roleCommand, proto.StateRunning, earlier), "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := cutByReboot(tt.r, tt.boot); got != tt.want {
				t.Errorf("cutByReboot(%s %s of boot %q, boot %q) = %v; want %v", tt.r.Role, tt.r.State, tt.r.Owner.BootID, tt.boot, got, tt.want)
			}
		})
	}
}

// TestRespawnCommand: the restart line of a lost session is a command a
// shell runs as written, without its --setenv values.
func TestRespawnCommand(t *testing.T) {
	r := &proto.Registry{Name: "notes", Team: "adhoc"}
	spec := &proto.Spec{Cwd: "/home/a b", ArgvNew: []string{"/bin/sh", "-c", "echo 'hi'; sleep 9"},
		Env: []string{"TOKEN=secret"}, SessionFile: "/tmp/f", StaleAfter: proto.Duration(90 * time.Second)}
	want := `legion spawn --team adhoc --name notes --cwd '/home/a b' --watch /tmp/f --stale-after 1m30s -E KEY=VALUE... (its 1 --setenv values) -- /bin/sh -c 'echo '\''hi'\''; sleep 9'`
	if got := respawnCommand(r, spec); got != want {
		t.Errorf("respawnCommand = %s\nwant %s", got, want)
	}
}

// TestRecoveryAfterReboot: the first helper after a reboot lists each
// `legion spawn` session that was running as lost, with the cause and
// the commands to start it again or forget it, and keeps it so across
// its own restarts; it prunes, as before, a team's worker (its controller
// starts it again), a session that had ended by itself and one a person
// killed. Starting a lost session again under its name and forgetting one
// both work.
//
// The sandbox cannot reboot: its "reboot" is what a reboot leaves on
// disk, made by the real parts. The helper stops; systemd stops the units
// (SIGTERM, as at shutdown) but one, whose processes are SIGKILLed first
// (as by a power cut, so its worker writes nothing more); then a helper
// starts with another boot ID (Options.BootID, the one seam), on the same
// state directory and manager, where the transient units are gone as
// after a boot.
func TestRecoveryAfterReboot(t *testing.T) {
	sd := sdtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	before := startInProcessOn(t, nil, Options{})
	c := before.client(t)
	stateDir := before.h.opts.StateDir
	spawn := func(a api.SpawnArgs) api.SpawnResult {
		t.Helper()
		res, err := c.Spawn(ctx, a)
		if err != nil {
			t.Fatalf("Spawn %s: %v", a.Name, err)
		}
		return res
	}
	notes := spawn(testLaunch("notes", "/bin/sh", "-c", "echo started; exec sleep 1000"))
	cut := spawn(testLaunch("powercut", "/bin/sleep", "1000"))
	done := spawn(testLaunch("done", "/bin/true"))
	killed := spawn(testLaunch("killed", "/bin/sleep", "1000"))
	w := testLaunch("WEB-1-implement", "/bin/sleep", "1000")
	w.Issue, w.Mode, w.Role = "WEB-1", "implement", roleWorker
	w.ID = uuid.NewString()
	worker := spawn(w)
	for _, n := range []string{"notes", "powercut", "WEB-1-implement"} {
		poll(t, ctx, n+" to run", func() (bool, string) {
			s, err := c.Status(ctx, n)
			return err == nil && s.State == api.StateRunning && s.PID != 0, fmt.Sprintf("%+v, %v", s, err)
		})
	}
	poll(t, ctx, "done to exit", func() (bool, string) {
		s, err := c.Status(ctx, "done")
		return err == nil && s.State == api.StateExited, fmt.Sprintf("%+v, %v", s, err)
	})
	if _, err := c.Kill(ctx, "killed"); err != nil {
		t.Fatalf("Kill: %v", err)
	}

	// The reboot.
	before.stop(t)
	if out, err := sd.Systemctl(t, "kill", "--signal=SIGKILL", cut.Unit); err != nil {
		t.Fatalf("systemctl kill %s: %v: %s", cut.Unit, err, out)
	}
	for _, u := range []string{notes.Unit, cut.Unit, worker.Unit} {
		if out, err := sd.Systemctl(t, "stop", u); err != nil {
			t.Fatalf("systemctl stop %s: %v: %s", u, err, out)
		}
	}
	for _, want := range []struct {
		id, state string
	}{{notes.ID, proto.StateStopped}, {cut.ID, proto.StateRunning}, {worker.ID, proto.StateStopped}, {done.ID, proto.StateExited},
		{killed.ID, proto.StateStopped}} {
		r, err := proto.ReadRegistry(filepath.Join(stateDir, registryDir, want.id+".json"))
		if err != nil || r.State != want.state || r.Owner.Alive() {
			t.Fatalf("registry entry of %s before the new boot: %+v, %v; want state %s and its worker gone", want.id, r, err, want.state)
		}
	}
	newBoot := uuid.NewString()

	after := startInProcessOn(t, nil, Options{BootID: newBoot})
	c = after.client(t)
	list, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := (api.RecoveryCounts{Pruned: 3, Lost: 2}); list.Recovery != want {
		t.Errorf("recovery counts after the reboot = %+v; want %+v", list.Recovery, want)
	}
	var got []string
	for _, s := range list.Sessions {
		got = append(got, s.Name+":"+string(s.State))
	}
	if diff := cmp.Diff([]string{"notes:lost", "powercut:lost"}, got); diff != "" {
		t.Errorf("sessions after the reboot (-want +got):\n%s", diff)
	}
	s, err := c.Status(ctx, "notes")
	if err != nil {
		t.Fatalf("Status notes: %v", err)
	}
	for _, want := range []string{"the machine rebooted while it ran",
		"legion spawn --team adhoc --name notes --cwd / -- /bin/sh -c 'echo started; exec sleep 1000'", "legion sessions kill notes"} {
		if !strings.Contains(s.Cause, want) {
			t.Errorf("cause of the lost session = %q; want it to say %q", s.Cause, want)
		}
	}
	if _, err := c.Send(ctx, "notes", "x", false); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("Send to a lost session = %v; want not_running", err)
	}
	for _, id := range []string{worker.ID, done.ID, killed.ID} {
		if _, err := os.Stat(filepath.Join(stateDir, prunedDir, id+".json")); err != nil {
			t.Errorf("entry %s: %v; want it pruned", id, err)
		}
	}

	// A restart of the helper in the new boot finds them lost again.
	after.stop(t)
	again := startInProcessOn(t, nil, Options{BootID: newBoot})
	c = again.client(t)
	if list, err = c.List(ctx); err != nil || list.Recovery != (api.RecoveryCounts{Lost: 2}) {
		t.Fatalf("List after a helper restart = %+v, %v; want 2 lost", list.Recovery, err)
	}

	// Started again under its name: the same session, running.
	res, err := c.Spawn(ctx, testLaunch("notes", "/bin/sh", "-c", "echo second life; exec sleep 1000"))
	if err != nil || res.ID != notes.ID || !res.Started {
		t.Fatalf("Spawn of the lost session's name = %+v, %v; want a new start of %s", res, err, notes.ID)
	}
	poll(t, ctx, "notes to run again", func() (bool, string) {
		s, err := c.Status(ctx, "notes")
		return err == nil && s.State == api.StateRunning, fmt.Sprintf("%+v, %v", s, err)
	})
	// Forgotten: exited, its entry pruned, its spec (with its token) gone.
	if s, err := c.Kill(ctx, "powercut"); err != nil || s.State != api.StateExited {
		t.Errorf("Kill of a lost session = %+v, %v; want it forgotten, exited", s, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, prunedDir, cut.ID+".json")); err != nil {
		t.Errorf("entry of the forgotten session: %v; want it in registry/pruned", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, specDir, cut.ID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spec of the forgotten session: %v; want it removed", err)
	}
	if _, err := c.Kill(ctx, "powercut"); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("second Kill of the forgotten session = %v; want not_running", err)
	}
	list, err = c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(list.Sessions, func(s api.Session) bool { return s.State == api.StateLost }); i >= 0 {
		t.Errorf("a lost session after start and forget: %+v", list.Sessions[i])
	}
}

// TestLostSessionsThroughTheCLI: what a person sees after a reboot, with
// the real CLI and the socket-activated helper: `legion sessions list`
// shows the lost session with its cause, the restart command it prints
// runs as written and starts the session again, and `legion sessions
// kill` forgets another. Here the "reboot" leaves the registry entry as
// a worker of an earlier boot wrote it: stopped by systemd, with that
// boot's ID (the helper under legion.socket reads the kernel's).
func TestLostSessionsThroughTheCLI(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	var spawned []api.SpawnResult
	for _, name := range []string{"notes", "scratch"} {
		r := e.spawn(ctx, name, "/bin/sh", "-c", "echo \"it's $0\"; exec sleep 1000", name)
		spawned = append(spawned, r)
		e.poll(ctx, name+" to run", func() (bool, string) {
			s, err := e.client(ctx).Status(ctx, name)
			return err == nil && s.State == api.StateRunning, fmt.Sprintf("%+v, %v", s, err)
		})
	}
	e.stopHelper(ctx)
	earlier := uuid.NewString()
	for _, r := range spawned {
		if err := e.mgr.Stop(ctx, r.Unit); err != nil {
			t.Fatalf("stop %s: %v", r.Unit, err)
		}
		editRegistry(t, filepath.Join(e.stateDir, registryDir, r.ID+".json"), func(r *proto.Registry) { r.Owner.BootID = earlier })
	}

	out := e.mustLegion(ctx, "sessions", "list")
	t.Logf("legion sessions list:\n%s", out)
	for _, want := range []string{"notes lost: the machine rebooted while it ran", "scratch lost: ", "2 lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("legion sessions list lacks %q:\n%s", want, out)
		}
	}
	status := e.mustLegion(ctx, "sessions", "status", "notes")
	_, restart, ok := strings.Cut(status, "start it again with `")
	if restart, _, _ = strings.Cut(restart, "`"); !ok || !strings.HasPrefix(restart, "legion spawn ") {
		t.Fatalf("legion sessions status notes gives no restart command:\n%s", status)
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", restart)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(e.bin)+":"+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the printed restart command %s: %v\n%s", restart, err, b)
	}
	e.poll(ctx, "notes to run again, under the same ID", func() (bool, string) {
		s, err := e.client(ctx).Status(ctx, "notes")
		return err == nil && s.State == api.StateRunning && s.ID == spawned[0].ID, fmt.Sprintf("%+v, %v", s, err)
	})
	e.poll(ctx, "notes' transcript to show both lives", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(e.stateDir, "transcripts", spawned[0].ID+".log"))
		return strings.Count(string(b), "it's notes") == 2, string(b)
	})
	if out := e.mustLegion(ctx, "sessions", "kill", "scratch"); !strings.Contains(out, "session scratch forgotten") {
		t.Errorf("legion sessions kill of a lost session printed %q; want it forgotten", out)
	}
	if r := e.list(ctx); r.Recovery.Lost != 2 || slices.ContainsFunc(r.Sessions, func(s api.Session) bool { return s.State == api.StateLost }) {
		t.Errorf("after restart and forget: %+v; want no lost session left (the last recovery found 2)", r)
	}
}
