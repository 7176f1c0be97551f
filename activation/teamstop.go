package activation

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// shortID is a team's short id: the first 8 hex digits of its UUID.
var shortID = regexp.MustCompile(`^[0-9a-f]{8}$`)

// cmdTeamStop stops every loaded worker unit of a team (quarantined ones
// too: they are the team's units, whoever started them). With
// IfStopping it first asks the manager for the job pending on the team's
// controller unit and stops nothing unless it is "stop": the controller
// asks this as it gets SIGTERM, to tell `systemctl --user stop
// legion@<team>` from a restart, a crash or the watchdog, which leave the
// workers running. The controller reaches systemd only through here.
func (h *Helper) cmdTeamStop(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	var a api.TeamStopArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	if !shortID.MatchString(a.Short) {
		return nil, nil, api.Errorf(api.CodeBadRequest, "team.stop: short %q is not 8 lowercase hex digits (the team's short id)", a.Short)
	}
	res := api.TeamStopResult{Stopped: []string{}}
	if a.IfStopping && h.mgr == nil {
		// No systemd (the controller's pod): a controller's SIGTERM is a
		// rollout, a lost Lease or a deleted pod, never a stop of the
		// team; its sessions go on for the next controller.
		h.log.Info("team is not being stopped (no systemd): leaving its sessions running", "team", a.Team)
		return res, nil, nil
	}
	if a.IfStopping {
		ctl, err := unitname.ControllerUnit(a.Team)
		if err != nil {
			return nil, nil, api.Errorf(api.CodeBadRequest, "team.stop: %v", err)
		}
		if res.Job, err = h.mgr.Job(ctx, ctl); err != nil {
			return nil, nil, err
		}
		if res.Job != "stop" {
			h.log.Info("team is not being stopped: leaving its workers running", "team", a.Team, "controller_unit", ctl, "job", res.Job)
			return res, nil, nil
		}
	}
	var list []units.State
	if h.mgr != nil {
		var err error
		if list, err = h.mgr.List(ctx, unitPrefix+a.Short+"-*.service"); err != nil {
			return nil, nil, err
		}
	}
	logs := map[string]*slog.Logger{} // by unit: the session's logger, with its issue
	for _, s := range h.sessions.all() {
		logs[s.unit] = s.log
	}
	var errs []error
	for _, u := range list {
		log, ok := logs[u.Name]
		if !ok {
			log = h.log.With("team", a.Team, "unit", u.Name)
		}
		log.Info("stopping worker of a stopped team")
		if err := h.mgr.Stop(ctx, u.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Stopped = append(res.Stopped, u.Name)
	}
	rep, err := h.kube.callIfRunning(ctx, wire.Request{Op: wire.OpTeamStop, Short: a.Short})
	errs = append(errs, err)
	for _, n := range rep.Stopped {
		h.log.Info("stopped a session of a stopped team on kubernetes", "team", a.Team, "session", n)
		res.Stopped = append(res.Stopped, n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return res, nil, nil
}
