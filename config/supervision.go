package config

import "time"

// DefaultTeam is the built-in team every team starts from before
// [defaults] applies: the one source of Legion's supervision defaults
// (restart cooldown, start limit, staleness). The template legion@.service
// takes its restart policy from it; the helper has none of its own.
func DefaultTeam() Team { return defaultTeam() }

// Supervision is a restart policy as systemd takes it: RestartSec=,
// StartLimitIntervalSec= and StartLimitBurst=. Package units writes it into
// legion@.service and the teams' drop-ins and has no defaults for it: this
// package is the one place that decides, so the controller template, the
// teams' drop-ins and the workers the helper starts cannot drift apart.
type Supervision struct {
	RestartCooldown    time.Duration
	StartLimitInterval time.Duration
	StartLimitBurst    uint32
}

// Supervision is t's restart policy.
func (t Team) Supervision() Supervision {
	return Supervision{
		RestartCooldown:    t.RestartCooldown,
		StartLimitInterval: t.StartLimitInterval,
		StartLimitBurst:    uint32(max(t.StartLimitBurst, 0)),
	}
}
