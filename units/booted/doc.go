// Package booted boots the host's own root as a whole system (systemd as
// PID 1, journald, logind, user@.service) in a systemd-nspawn container
// over a throwaway overlay, for tests that need what a bare `systemd
// --user` (units/sandbox) lacks: login sessions and logout, lingering,
// the journal, a reboot, on Debian 12 with systemd 252, as set out below.
//
// The package owns the directory it makes, the processes it starts (a
// holder of the mount namespace and, per boot, systemd-nspawn), the cgroups
// it creates and every process in them. It must never touch the host's own
// files, mounts or processes: everything the container writes goes to a
// tmpfs, every mount is made in a private mount namespace, and it signals
// only the processes it started (through their os.Process) and processes
// it finds by PID in its own cgroups.
//
// How a system is set up:
//
//   - a fresh directory D = Options.Dir/NAME-PID-RANDOM on the host, which
//     holds the console log; D's base name is also the machine's name and
//     its cgroups' name;
//   - a cgroup named like D in each hierarchy the calling process is in
//     (internal/cgroups: name=systemd, pids, memory and unified on a hybrid
//     host), below the caller's own;
//   - the holder, a shell that moves itself into those cgroups and execs
//     `unshare -m` with a private propagation: in the new mount namespace
//     it mounts a tmpfs on /run (the host's /run may be plain disk, where
//     nspawn refuses to clean up), a tmpfs on D/fs and an overlay on
//     D/fs/root with lowerdir=/ and upper and work dirs on that tmpfs (an
//     upper dir on the root's own file system overlaps the lower layer);
//     then it sleeps. Its mount namespace, and so the overlay's upper
//     layer, lives as long as the holder: the container's disk;
//   - each boot, a launcher moves itself into a child cgroup boot-N and
//     execs `nsenter -m` into the holder's namespace and then
//     `systemd-nspawn --boot -D D/fs/root --register=no --keep-unit
//     --private-network`: nspawn makes payload/ and supervisor/ below its
//     own cgroup. The default target is legion-booted.target, written
//     into the overlay: sysinit, D-Bus, logind and user sessions, not the
//     host's own services (boot takes about half a second). It is ready
//     when `systemctl is-system-running --wait` inside says running or
//     degraded.
//
// Commands run inside with `nsenter -t PID1 -a`: as root (Run), or as a
// user in a real logind login session (Login: `systemd-run -p
// PAMName=login -p User=U`, class user and type tty as on a terminal, so
// the command's end is a logout). OpenSession keeps a session open in the
// background until its Close. SetLinger turns lingering on and off; Path
// reaches the container's files from the host (Install copies one in).
//
// Reboot powers the container off (SIGTERM to nspawn, which makes systemd
// halt cleanly) and boots it again over the same overlay: the disk, /home
// included, stays, while /run and every process start afresh.
//
// Stop powers off, SIGKILLs what is left in the system's cgroups (the
// holder included), removes the cgroups children first, and removes D.
// The mounts go with the holder's mount namespace: the host never sees
// them. If the process that called Boot dies without Stop, the holder gets
// SIGKILL and nspawn SIGTERM (parent death signals), so the container
// powers off and the namespace goes; the next Boot with the same Dir and
// Name removes the emptied cgroups and the directory.
//
// Only root can boot a system, with systemd-nspawn installed at the host's
// systemd version (scripts/check-deps installs systemd-container pinned to
// it). Boot reports anything the machine lacks as a *MissingError before
// it changes anything.
//
// Resource limits (MemoryMax=, CPUQuota=, TasksMax=) are not enforced
// inside on a host that binds every controller to cgroup v1.
package booted
