// Package journal is Legion's side of the systemd journal: the logger of
// its daemons (the helper `legion helper`, the controllers `legion
// controller`, and every worker `legion-pty-worker`), the reader behind
// `legion logs`, and the check of whether a user can read their own lines.
// It never logs on its own.
//
// # Fields
//
// Under systemd each log/slog record is one journal entry sent in
// journald's native protocol: MESSAGE is the message followed by its
// attributes as key=value (what journalctl shows), PRIORITY the level,
// SYSLOG_IDENTIFIER the program ("legion" or "legion-pty-worker"), and
// five attributes, when the record has them at top level (not in a
// group), are also fields of their own:
//
//	attribute  field           meaning
//	team       LEGION_TEAM     the team's name, as in legion.toml
//	issue      LEGION_ISSUE    the tracker's issue ID, e.g. WEB-1
//	mode       LEGION_MODE     the worker's phase: plan, implement, review, retro, finish, controller
//	session    LEGION_SESSION  the agent conversation's session ID (a UUID), the one the agent is
//	                           started or resumed with (proto.Spec.AgentSessionID): a retro's
//	                           lines share the implementer's
//	unit       LEGION_UNIT     the worker unit the line is about (legion-<short>-<issue>-<mode>.service),
//	                           on the worker's own lines and on the helper's and controller's lines
//	                           about it
//
// No other attribute becomes a field (err, name, pid, ... are only in
// MESSAGE): the journal's field namespace is global, and a field is
// something a person matches on. Which unit wrote a line is journald's own
// trusted field _SYSTEMD_USER_UNIT (legion.service: the helper,
// legion@TEAM.service: a controller, a worker's unit: that worker).
// journald reads it from the sender's cgroup in /proc when it handles the
// line, so a line a process sends just before it exits can lack it (seen
// once in CI on a worker's last lines); ParseEntry then takes a worker's
// unit from its LEGION_UNIT, which the worker sets to its own unit.
//
// Every line about an issue carries LEGION_TEAM and LEGION_ISSUE, so
// `journalctl --user LEGION_ISSUE=WEB-1` (or `legion logs TEAM WEB-1`) is
// the whole story of the issue: the controller's decisions, the helper's
// spawns and kills, the worker's agent starts, states and exits.
//
// The worker sets these fields itself, on every line: systemd 252 does not
// apply LogExtraFields= to user units (only the system manager exports a
// unit's log settings to /run/systemd/units/, where journald reads them:
// systemd/systemd#29956), so the worker's lines carried no field when it
// logged text to stderr under a unit with LogExtraFields=.
//
// The controller logs a decision before applying it and the helper a spawn
// before starting the unit, so that in the journal (ordered by arrival)
// the helper's and the worker's lines follow the decision that caused them.
//
// # Reading
//
// Read runs journalctl with --output=json: journald's own reader (it
// knows the file format, rotation, per-user files and the access rules
// exactly as the user's own journalctl does), with structured output that
// ParseEntry decodes (never journalctl's text). go-systemd's sdjournal,
// the other choice, needs cgo and libsystemd's headers at build, and
// Legion's binaries are static (CGO_ENABLED=0). Read matches _UID (only
// this user's processes) and not --user: with a volatile journal a member
// of the systemd-journal group reads their lines from the system journal,
// which --user never opens.
//
// # Who can read their lines
//
// journald writes a user's lines to the user's own file
// (/var/log/journal/MACHINE/user-UID.journal, readable by the user) only
// when the journal is persistent. A volatile journal (no /var/log/journal,
// or Storage=volatile) puts every line in /run/log/journal/MACHINE/system.journal,
// which only root and the systemd-journal and adm groups read: then
// `journalctl --user` finds nothing ("insufficient permissions"). Check
// tells which case holds; `legion doctor` reports it with the fix.
package journal
