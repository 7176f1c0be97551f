//go:build !demo

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// demoBuilt says that this legion has the demo (exposed for tests).
const demoBuilt = false

// errNoDemo is what `legion demo` says in a legion built without the demo
// tag, as `make build`, `make install` and the packages build it.
var errNoDemo = errors.New("this legion was built without the demo, which links test code " +
	"(a fake Anthropic API, a private systemd manager, the scripted agent): " +
	"run `make demo` in Legion's source tree, which builds bin/demo/legion with -tags demo and runs it")

// demoCmds are, without the demo tag, a hidden `legion demo` that fails
// (exit status 1) saying how to get the demo: the shipped legion's help
// and man pages do not list it.
func demoCmds(_ *globals) []*cobra.Command {
	return []*cobra.Command{{
		Use:                "demo",
		Short:              "Not in this build: run `make demo` in Legion's source tree",
		Hidden:             true,
		DisableFlagParsing: true, // `legion demo --web` gets the same answer
		RunE:               func(*cobra.Command, []string) error { return errNoDemo },
	}}
}
