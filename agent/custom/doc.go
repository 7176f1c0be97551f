// Package custom is the agent kind of any terminal program (agent.kind =
// "custom"), run as the team's agent.new says. No settings, no session
// file (so no resume), liveness from its output, no state and no
// completion detection: the program must exit by itself when its phase is
// done. It records no usage Legion can read and has no check of its own.
package custom
