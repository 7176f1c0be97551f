//go:build race

package ptyworker

// raceEnabled: built with -race, which slows a test's client (every copy
// and allocation it makes is checked) far more than the PTY, whose bytes
// the kernel copies.
const raceEnabled = true
