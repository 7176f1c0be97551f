// Package proto holds what other packages need to know of the worker
// without linking its daemon (the PTY, the terminal emulator, the hook
// handling): the bounds of its output ring, which legion.toml's
// worker.ring_size and a spawn's ring_size are checked against.
//
// It owns those values; package ptyworker uses them. It imports nothing of
// Legion's, so that package config, which every reader of legion.toml
// links, links no worker code.
package proto

// The worker's output ring, in bytes: its default size and the sizes it
// accepts.
const (
	DefaultRingSize = 1 << 20
	MinRingSize     = 4 << 10
	MaxRingSize     = 256 << 20
)
