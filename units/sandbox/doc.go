// Package sandbox starts a private, real systemd user manager on a machine
// that has none (PID 1 is not systemd: containers, CI), for `legion demo`
// and, through units/sdtest, for tests. Each sandbox has its own directory,
// runtime dir, home, D-Bus session bus, and mount and cgroup namespaces, so
// several sandboxes, in one process or in many, never see each other's
// units.
//
// The package owns the sandbox directory it makes, the manager process it
// starts, the cgroups it creates and every process in them. It must never
// touch the real user's manager, home or runtime dir, and never signal a
// process it did not start: it signals only the manager it started (through
// its os.Process) and processes it finds by PID in its own cgroups.
//
// How a sandbox is set up (a dbus-daemon started beside the manager, as
// some recipes have it, does not work on systemd 252; see below):
//
//   - a fresh directory D = Options.Dir/NAME-PID-RANDOM (NAME is Options.Name,
//     PID the starting process's) with D/run (0700) as XDG_RUNTIME_DIR and
//     D/home as HOME, the XDG_*_HOME dirs below it; D stays short because
//     D/run/systemd/private must fit in a unix socket address;
//   - a cgroup named like D in each mounted hierarchy (name=systemd, pids,
//     memory, unified; or the one cgroup2 hierarchy), below the starting
//     process's own cgroup;
//   - a launcher shell writes its PID into those cgroups, then execs
//     `unshare -m -C`, which mounts a tmpfs on /run/systemd (systemd's
//     "booted with systemd" test wants /run/systemd/system) and remounts the
//     hierarchies so the manager sees its cgroup as the root, and execs
//     `systemd --user`;
//   - the session bus is the manager's own: D/run/systemd/user holds a
//     dbus.socket listening on D/run/bus and the dbus.service it activates.
//     (A dbus-daemon started beside the manager does not work: systemd 252
//     joins the API bus only when its own dbus.socket and dbus.service
//     units are running, and a dbus.socket unit replaces the socket file.)
//   - the manager logs to /dev/console only, and there is no journal: inside
//     the namespace a pty of the starting process is /dev/console, copied
//     into D/manager.log (and Options.Log), and D/home/.config/systemd/user.conf
//     sends the output of units there too (Sandbox.Log);
//   - ready when D/run/systemd/private exists, the bus says
//     org.freedesktop.systemd1 has an owner, and startup jobs are done.
//
// Stop runs `systemctl --user exit`, waits, SIGKILLs what is left in the
// sandbox's cgroups, removes the cgroups children first, and removes D.
//
// If the process that called Start dies without calling Stop (killed, or it
// crashed), the manager is not left behind: it was started with a parent
// death signal, so the kernel sends it SIGTERM, on which a user manager
// stops its units and exits (a unit that ignores SIGTERM delays that by its
// stop timeout, 90 s by default, after which systemd SIGKILLs it). What
// stays is D and the emptied cgroups; the next Start with the same
// Options.Dir and Options.Name removes them. That sweep only touches
// directories and cgroups named NAME-PID-RANDOM whose PID is no live
// process, whose cgroups hold no process and whose manager socket does not
// answer, so it never touches a live sandbox, and it kills nothing.
//
// Only root can start a sandbox. Start reports anything the machine lacks
// as a *MissingError before it changes anything.
//
// It is test code (internal/layout's testOnly): only tests and a legion
// built with the demo tag link it, never the shipped binaries.
package sandbox
