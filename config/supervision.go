package config

import "github.com/legion-dev/legion/units"

// DefaultTeam is the built-in team every team starts from before
// [defaults] applies: the one source of Legion's supervision defaults
// (restart cooldown, start limit, staleness). The template legion@.service
// takes its restart policy from it; the helper has none of its own.
func DefaultTeam() Team { return defaultTeam() }

// Supervision is t's restart policy as systemd takes it: RestartSec=,
// StartLimitIntervalSec= and StartLimitBurst=.
func (t Team) Supervision() units.Supervision {
	return units.Supervision{
		RestartCooldown:    t.RestartCooldown,
		StartLimitInterval: t.StartLimitInterval,
		StartLimitBurst:    uint32(max(t.StartLimitBurst, 0)),
	}
}
