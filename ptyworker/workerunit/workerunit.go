// Package workerunit builds the transient systemd service that runs one
// session's legion-pty-worker. It is apart from package ptyworker so that
// the worker program, which only runs under such a unit, links neither
// package units nor the D-Bus client.
package workerunit

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// Policy is the supervision policy of a worker unit (from the team's
// config).
type Policy struct {
	Binary   string // absolute path of legion-pty-worker (proto.FindBinary)
	SpecPath string // absolute path of the spec file (0600)

	Cooldown           time.Duration // RestartSec: pause before a restart
	Watchdog           time.Duration // WatchdogSec: how long systemd waits for WATCHDOG=1
	StartLimitBurst    uint32        // restarts allowed within StartLimitInterval
	StartLimitInterval time.Duration
	StopTimeout        time.Duration // TimeoutStopSec
}

// Transient builds the transient service that runs the worker of s:
// Type=notify with the watchdog, Restart=on-failure after the cooldown
// (but not after proto.ExitAgentNotStartable: an agent that cannot be
// started fails the unit at once and leaves it failed; nor after
// proto.ExitSpecUnreadable: a restart would read the same bad spec, and the
// helper writes a fresh one when the session is dispatched again), the start limit, KillMode=mixed (SIGTERM to the worker, which ends the agent;
// SIGKILL to what is left after the stop timeout), the team's slice, and the
// session's identity in the environment (the worker puts it in its journal
// fields itself, see internal/journal). No secret
// goes into the unit: the token stays in the spec file.
func Transient(s *proto.Spec, p Policy) (units.Unit, error) {
	if err := s.Validate(); err != nil {
		return units.Unit{}, fmt.Errorf("worker unit for session %s: spec: %w", s.SessionID, err)
	}
	if s.Unit == "" || !unitname.ValidName(s.Unit, unitname.NamePlain) || filepath.Ext(s.Unit) != ".service" {
		return units.Unit{}, fmt.Errorf("worker unit for session %s: unit %q is not a valid service name", s.SessionID, s.Unit)
	}
	if !filepath.IsAbs(p.Binary) || !filepath.IsAbs(p.SpecPath) {
		return units.Unit{}, fmt.Errorf("worker unit %s: binary %q and spec path %q must be absolute", s.Unit, p.Binary, p.SpecPath)
	}
	if err := p.validate(); err != nil {
		return units.Unit{}, fmt.Errorf("worker unit %s: %w", s.Unit, err)
	}
	slice, err := unitname.TeamSlice(s.TeamShort)
	if err != nil {
		return units.Unit{}, fmt.Errorf("worker unit %s: %w", s.Unit, err)
	}

	desc := "Legion session " + s.Name + " (team " + s.Team
	if s.Issue != "" {
		desc += ", " + s.Issue
	}
	if s.Mode != "" {
		desc += ", " + s.Mode
	}
	desc += ")"

	// LEGION_SESSION is the agent conversation's session ID, as in the
	// agent's own environment (see proto.Spec.AgentSessionID). The
	// journal fields are the worker's to set on its lines: systemd 252
	// does not apply LogExtraFields= to user units (the user manager does
	// not export it where journald reads it, systemd/systemd#29956).
	env := []string{"LEGION_SESSION=" + s.AgentSessionID(), "LEGION_TEAM=" + s.Team}
	if s.Issue != "" {
		env = append(env, "LEGION_ISSUE="+s.Issue)
	}
	if s.Mode != "" {
		env = append(env, "LEGION_MODE="+s.Mode)
	}

	opts := []units.Option{
		units.String("Unit", "Description", desc),
		units.Uint32("Unit", "StartLimitBurst", p.StartLimitBurst),
		units.Duration("Unit", "StartLimitIntervalSec", "StartLimitIntervalUSec", p.StartLimitInterval),
		units.String("Service", "Type", "notify"),
		units.String("Service", "NotifyAccess", "main"),
		units.Exec("ExecStart", []string{p.Binary, "--spec", p.SpecPath}),
		units.String("Service", "Restart", "on-failure"),
		restartPreventExitStatus(proto.ExitAgentNotStartable, proto.ExitSpecUnreadable),
		units.Duration("Service", "RestartSec", "RestartUSec", p.Cooldown),
		units.Duration("Service", "WatchdogSec", "WatchdogUSec", p.Watchdog),
		units.String("Service", "KillMode", "mixed"),
		units.Duration("Service", "TimeoutStopSec", "TimeoutStopUSec", p.StopTimeout),
		units.String("Service", "Slice", slice),
		// Under memory pressure the kernel kills an agent before Legion's
		// own units (units.AgentOOMScoreAdjust says why a raise).
		units.Int32("Service", "OOMScoreAdjust", units.AgentOOMScoreAdjust),
		units.Environment(env),
	}
	return units.Unit{Name: s.Unit, Options: opts}, nil
}

func (p Policy) validate() error {
	switch {
	case p.Cooldown < 0:
		return errors.New("cooldown must not be negative")
	case p.Watchdog < time.Second:
		return fmt.Errorf("watchdog %s: want at least 1s", p.Watchdog)
	case p.StartLimitBurst == 0:
		return errors.New("start limit burst must be at least 1")
	case p.StartLimitInterval <= 0:
		return errors.New("start limit interval must be positive")
	case p.StopTimeout <= 0:
		return errors.New("stop timeout must be positive")
	}
	return nil
}

// restartPreventExitStatus is RestartPreventExitStatus= with exit codes
// only; D-Bus types it as a struct of exit codes and signals, which package
// units has no constructor for.
func restartPreventExitStatus(codes ...int32) units.Option {
	text := make([]string, len(codes))
	for i, c := range codes {
		text[i] = strconv.Itoa(int(c))
	}
	v := struct{ Codes, Signals []int32 }{codes, []int32{}}
	return units.Option{
		Section: "Service", Key: "RestartPreventExitStatus", Value: strings.Join(text, " "),
		Prop: &sddbus.Property{Name: "RestartPreventExitStatus", Value: dbus.MakeVariant(v)},
	}
}
