package activation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Sessions a reboot cut.
//
// A worker unit is transient: it does not survive a reboot, and nothing
// starts it again at boot. A team's workers need nothing from the helper
// then: their controller (legion@TEAM, enabled, starts at boot) sees an
// issue with no live worker and dispatches it again, resuming the agent's
// own deterministic session. A `legion spawn` session has no such owner,
// and the helper does not start it again by itself: it runs any command
// (one that must not run twice, a deploy, a migration, as well as an
// agent), and the helper runs only on the first connection after boot, so
// a restart would come at a moment no one chose. So such a session is
// kept, listed as lost (api.StateLost) with the cause and the command
// that starts it again, until a person runs it again (`legion spawn` of
// the same name: the same session ID, the transcript goes on) or forgets
// it (`legion sessions kill`, which moves its entry to registry/pruned).
//
// Cut by a reboot means, for a registry entry whose unit is gone and
// whose worker lease is stale: a `legion spawn` session (role command)
// whose worker ran in another boot (its lease's boot ID is not this
// boot's) and hosted a live agent when it last wrote its entry (state
// starting or running: killed without a word, as by a power cut; or
// stopped: told to stop, as systemd stops every unit at shutdown), and
// whose spec is still there (`legion sessions kill` stops the unit too,
// and removes the spec). An entry that says its agent exited, was removed
// or completed ended by itself or by a person, reboot or not, and is
// pruned as before; so is an entry without a boot ID (a worker older than
// the field). A unit a person stopped with `systemctl --user stop` just
// before a reboot, with no helper start in between, looks the same as
// one the shutdown stopped, and is listed as lost.

// cutByReboot reports whether the entry r, whose unit is gone and whose
// lease is stale, is of a session a reboot cut; boot is this boot's ID
// ("" when unknown: then none is).
func cutByReboot(r *proto.Registry, boot string) bool {
	if r.Role != roleCommand || boot == "" || r.Owner.BootID == "" || r.Owner.BootID == boot {
		return false
	}
	switch r.State {
	case proto.StateStarting, proto.StateRunning, proto.StateStopped:
		return true
	}
	return false
}

// lostCause is what `legion sessions list` and status say of a lost
// session: that a reboot cut it, when its worker last wrote, and the
// commands that start it again or forget it. spec is the session's spec:
// its command goes into the restart line.
func lostCause(r *proto.Registry, spec *proto.Spec) string {
	var b strings.Builder
	b.WriteString("the machine rebooted while it ran")
	if !r.UpdatedAt.IsZero() {
		fmt.Fprintf(&b, " (its worker last wrote at %s, in an earlier boot)", r.UpdatedAt.Local().Format(time.DateTime))
	}
	b.WriteString("; start it again with `")
	b.WriteString(respawnCommand(r, spec))
	fmt.Fprintf(&b, "` (the same session; its transcript goes on), or forget it with `legion sessions kill %s`", r.Name)
	return b.String()
}

// respawnCommand is the `legion spawn` command line that starts the
// session of r again under its name. The spec gives the command, its
// directory and its watch; --setenv values are left out (they may be
// secrets), so a session that had some says so.
func respawnCommand(r *proto.Registry, spec *proto.Spec) string {
	words := []string{"legion", "spawn", "--team", r.Team, "--name", r.Name, "--cwd", spec.Cwd}
	if spec.SessionFile != "" {
		words = append(words, "--watch", spec.SessionFile, "--stale-after", time.Duration(spec.StaleAfter).String())
	}
	line := shellquote.Join(words)
	if len(spec.Env) > 0 {
		line += fmt.Sprintf(" -E KEY=VALUE... (its %d --setenv values)", len(spec.Env))
	}
	return line + " -- " + shellquote.Join(spec.ArgvNew)
}

// markLost keeps the entry at path of a session a reboot cut as a lost
// session of the table: the entry stays in registry/ and the spec in
// specs/, so the next recovery finds it lost again. It reports false,
// doing nothing, when the session has no spec of this helper: a person
// killed it.
func (h *Helper) markLost(log interface{ Warn(string, ...any) }, r *proto.Registry, path string) (entryResult, bool) {
	spec, err := proto.ReadSpec(filepath.Join(h.opts.StateDir, specDir, r.SessionID+".json"))
	if err != nil || spec.SessionID != r.SessionID || spec.Token != r.Token {
		return entryResult{}, false
	}
	res := h.adopt(r, path, unitState(nil, r.Unit), nil, 0, nil, r.Unit)
	res.kind = lost
	res.s.lost = lostCause(r, spec)
	log.Warn("recovery: the machine rebooted while this session ran; listed as lost", "worker_boot", r.Owner.BootID, "last_state", r.State)
	return res, true
}

// forget ends a lost session for good: its entry goes to registry/pruned
// (status and logs still find it) and its spec, which holds its token, is
// removed.
func (h *Helper) forget(s *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := moveAside(s.regPath, filepath.Join(h.opts.StateDir, prunedDir)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("forget session %s: move its registry entry aside: %w", s.name, err)
	}
	h.removeSpecFor(s.id + ".json")
	s.regPath = filepath.Join(h.opts.StateDir, prunedDir, filepath.Base(s.regPath))
	s.lost, s.ended = "", true
	s.log.Info("forgot a session the machine's reboot had cut")
	return nil
}

// lostView turns the view of a session that recovery found lost: its
// unit is gone, so the view derived from it says exited.
func lostView(v *api.Session, cause string) {
	if cause != "" && v.State == api.StateExited {
		v.State, v.Cause = api.StateLost, cause
	}
}
