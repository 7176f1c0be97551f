package config

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// AdhocTeam is the built-in team of `legion spawn` without --team. Its
// UUID is fixed (AdhocTeamID), so its sessions' IDs and unit names are
// stable; a configured team of the same name replaces it.
const AdhocTeam = "adhoc"

// AdhocTeamID is the UUID of AdhocTeam: UUIDv5 of the URL namespace and
// "https://github.com/legion-dev/legion#team-adhoc".
var AdhocTeamID = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/legion-dev/legion#team-adhoc"))

// SpawnTeam returns the team `legion spawn --team name` runs a command in:
// the configured team of that name or, for "" and AdhocTeam when no team
// has that name, the built-in team AdhocTeam with the policy of
// [defaults]. Any other name is an error listing the teams.
func (c *Config) SpawnTeam(name string) (Team, error) {
	if name == "" {
		name = AdhocTeam
	}
	if t, ok := c.Team(name); ok {
		return t, nil
	}
	if name == AdhocTeam {
		t := c.Defaults
		t.Name, t.ID = AdhocTeam, AdhocTeamID
		return t, nil
	}
	known := []string{AdhocTeam}
	for _, t := range c.Teams {
		known = append(known, t.Name)
	}
	return Team{}, fmt.Errorf("unknown team %q: the teams of %s are %s (`legion team add` adds one)", name, c.Path, strings.Join(known, ", "))
}
