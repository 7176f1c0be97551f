// Package envlist reads environments kept as KEY=VALUE lists (os.Environ,
// exec.Cmd.Env, `systemctl --user show-environment`): the one lookup, in
// which a later assignment of a key wins, as for a process given the
// list. It imports nothing of Legion's.
package envlist

import (
	"slices"
	"strings"
)

// Lookup is the value of key in env, the last assignment of it winning,
// and whether env assigns it.
func Lookup(env []string, key string) (string, bool) {
	for _, kv := range slices.Backward(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
