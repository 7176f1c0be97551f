package sdtest

import (
	"os"
	"testing"
)

// Require skips the test when ok is false, saying that what is missing; with
// CI=true in the environment it fails the test instead, so a broken setup
// never passes as green. what names the prerequisite, e.g. "running as root".
func Require(t testing.TB, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing: %s (CI=true, so this fails instead of skipping)", what)
	}
	t.Skipf("prerequisite missing: %s (skipping; with CI=true this fails)", what)
}
