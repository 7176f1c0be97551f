// Package systemtest holds Legion's booted-system tests, the second test
// tier: Legion as an ordinary user runs it, on a whole booted system
// (units/booted: systemd as PID 1, journald, logind, user@.service) in
// real login sessions: the README's quick start, an issue's full cycle
// under an enabled legion@TEAM, logout with and without lingering, a
// reboot in the middle of a phase, the chaos run's reboot fault (seeded
// reboots and kills while a backlog runs), the journal of an issue (also
// as the dashboard's Session view reads it), and `legion uninstall`.
// Claude Code is the scripted agent (`legion scripted-agent`, of the
// tests' legion, built with the demo tag) behind a `claude` on the user's
// PATH, so teams keep the default agent kind.
//
// Every test boots its own system (about half a second) and needs root and
// systemd-nspawn (bootedtest.Require: skipped otherwise, failed with
// CI=true). The package has only tests.
package systemtest
