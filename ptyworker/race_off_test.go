//go:build !race

package ptyworker

// raceEnabled: see race_on_test.go.
const raceEnabled = false
