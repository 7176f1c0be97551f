package units

// What the kernel and systemd-oomd kill first under memory pressure: an
// agent, never Legion's own units.
//
// An unprivileged user manager can raise a unit's oom_score_adj but not
// lower it below what the manager itself has (the kernel wants
// CAP_SYS_RESOURCE for that; user@.service starts managers at
// OOMScoreAdjust=100 on Debian and Fedora, and a unit asking for less
// fails to start). So Legion's units keep the manager's value and every
// agent's worker unit raises its own to AgentOOMScoreAdjust: the kernel's
// badness of a process is its memory in pages plus oom_score_adj
// thousandths of all memory, so an agent at 500 is picked before any
// process of the user's at the manager's value that is not larger by half
// the machine's memory, Legion's small helper and controllers among them,
// and the rest of the user's session too. Within a team's slice, whose
// MemoryMax= triggers the kernel's OOM killer inside it, the controller
// (legion@TEAM.service runs in that slice) is never the pick while an
// agent runs there.
//
// systemd-oomd acts on cgroups, not processes: each team's slice asks it
// to watch the slice's memory pressure (ManagedOOMMemoryPressure=kill),
// and Legion's units opt out as candidates (ManagedOOMPreference=omit),
// which systemd-oomd honours for a user's units since systemd 252 when the
// watched cgroup belongs to the same user (systemd/systemd#23764), as the
// team's slice and user@UID.service do. Where systemd-oomd does not run,
// the settings do nothing.

// AgentOOMScoreAdjust is OOMScoreAdjust= of every agent's worker unit.
const AgentOOMScoreAdjust = 500

// legionOOMPreference is ManagedOOMPreference= of Legion's own units.
const legionOOMPreference = "omit"
