package claudecode

import "github.com/google/uuid"

// SessionID is the deterministic session ID of the agent working on issue in
// mode for a team: UUIDv5(team, "<issue>:<mode>") with the name as UTF-8,
// the same value Python's uuid.uuid5(team, f"{issue}:{mode}") gives. Same
// inputs, same ID, so a restarted agent resumes its own session.
func SessionID(team uuid.UUID, issue, mode string) uuid.UUID {
	return uuid.NewSHA1(team, []byte(issue+":"+mode))
}

// ControllerSessionID is the deterministic session ID of a team's controller
// agent: UUIDv5(team, "controller"). It never equals a worker's SessionID,
// whose names always contain a colon.
func ControllerSessionID(team uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(team, []byte("controller"))
}
