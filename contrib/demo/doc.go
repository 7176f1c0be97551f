// Package demo is `legion demo`: it runs a throwaway team of three issues
// through plan → implement → review → retro → finish under a real
// legion@<team> controller, with the scripted agent standing in for Claude
// Code, shows a live board, and cleans up.
//
// It links test code (the scripted agent, the fake Anthropic API, the
// private manager of units/sandbox), so only a legion built with the demo
// build tag links it (cmd/legion/demo.go; `make demo` builds
// bin/demo/legion so), and, as test code itself, no package but tests and
// that file may (internal/layout checks both). The shipped legion's
// `legion demo` only says to run `make demo`.
//
// Where it runs:
//
//   - When units.Connect reaches the user's systemd manager (and --sandbox
//     is not given), the demo uses it without touching anything of the
//     user's: it refuses to run when any Legion unit is already loaded (the
//     helper socket is per user, so a demo would share the user's helper);
//     it writes its unit files into the manager's runtime unit directory
//     $XDG_RUNTIME_DIR/systemd/user (not ~/.config, and nothing is enabled,
//     so no link lands in the user's configuration); its team is named
//     demo-<random>, its legion.toml lives in the demo's temp dir and
//     reaches the controller through a drop-in (Environment=LEGION_CONFIG)
//     and the agents through the helper (which takes the config path with
//     each dispatch). The team's tracker and worktrees are under
//     $XDG_STATE_HOME/legion/{teams,worktrees}/<short> (the controller and
//     agents run in the user's environment); the demo removes those two
//     directories, which belong to its fresh random team only. It also
//     removes what its sessions left in the user's directories: their spec,
//     registry and transcript files in $XDG_STATE_HOME/legion (found by
//     the team name in each spec and registry file), the scripted agent's
//     session files (the ~/.claude/projects directories named after the
//     team's worktrees), and the directories and daemon id that did not
//     exist before the demo (see leftovers). Other sessions' files stay;
//     the demo's helper recovers them at its start as any helper would
//     (a registry entry whose unit is gone is moved to registry/pruned).
//   - Otherwise, as root, it starts a private manager with units/sandbox
//     (its own HOME and XDG_* dirs, runtime dir, bus, cgroups), installs
//     with units.Install into the sandbox's ~/.config/systemd/user, and the
//     team is called "demo". Not root and no manager is an error saying
//     what to do.
//
// Run points the calling process's environment at the manager it uses
// (XDG_*, HOME, DBUS_SESSION_BUS_ADDRESS, LEGION_CONFIG), because
// units.Connect, api.Dial and config.StateDir read it: it is meant
// for a process that runs one demo (`legion demo`), not for a library
// caller that keeps running.
//
// The package owns the temp dir it makes, the units it installs and the
// sandbox it starts. It must never write into the user's unit or config
// directories, stop a unit it did not start, or leave a process behind.
package demo
