// Package controller turns a team's tracker state into agent work: it
// collects state in one pass, decides per issue which agent phase runs next
// (plan → implement → review → retro → finish) with the pure function
// Decide, and applies decisions by dispatching pty-worker units.
//
// Decide must stay pure: no I/O, no clock, no randomness. Everything it
// needs is in State, so the same state always yields the same decisions.
package controller
