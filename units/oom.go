package units

// What the kernel and systemd-oomd kill first under memory pressure: an
// agent, never Legion's own units.
//
// A process without CAP_SYS_RESOURCE (an unprivileged user's manager and
// its units) can set its oom_score_adj to anything above the floor that a
// process with that capability last set for it (the kernel's
// oom_score_adj_min, fs/proc/base.c; systemd as PID 1 sets it when it
// starts user@.service, at OOMScoreAdjust=100 on Debian and Fedora), but
// not below. systemd does not refuse a unit that asks for less: it starts
// it at the value it inherited (TestOOMScoreAdjust probes both under a
// manager without the capability). So lowering Legion's own units is not
// open to an unprivileged manager, and Legion's units keep the manager's
// value while every agent's worker unit raises its own to
// AgentOOMScoreAdjust: the kernel's badness of a process is its memory in
// pages plus oom_score_adj thousandths of all memory (of the cgroup's
// limit, inside a memory-limited cgroup), so an agent at 500 is picked
// before any process at the manager's value that is not larger by half of
// that, Legion's small helper and controllers among them, and the rest of
// the user's session too. Within a team's slice, whose MemoryMax=
// triggers the kernel's OOM killer inside it, the controller
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
