// Package capacity reads how much room a team has for one more agent, for
// the controller's capacity gate (controller.Room): the machine's
// MemAvailable (/proc/meminfo), what the team's slice legion-<short>.slice
// has left under its MemoryMax= (its cgroup's memory files, cgroup2 or the
// v1 memory hierarchy of a hybrid host), how many agent sessions of all
// teams the helper lists, and the team's expected agent size, learnt from
// the peak memory of its finished agents (their cgroups' memory.peak,
// sampled each tick and kept in the team's state directory, so that a
// restarted controller keeps what it learnt).
//
// It only reads: it starts, stops and limits nothing, and reaches systemd
// through no connection of its own (the helper's client for the session
// count, the cgroup filesystem for the rest). Only the team's controller
// learns (Options.Learn); `legion state` and the dashboard read what it
// learnt.
package capacity
