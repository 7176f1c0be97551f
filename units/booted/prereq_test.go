package booted

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckPrereqsNotRoot: an ordinary user gets a *MissingError that says
// root is needed, before anything else is looked at.
func TestCheckPrereqsNotRoot(t *testing.T) {
	_, err := checkPrereqs(t.Context(), 1000)
	var missing *MissingError
	if !errors.As(err, &missing) || !strings.Contains(missing.What, "running as root") {
		t.Fatalf("checkPrereqs(uid 1000) = %v; want a *MissingError about root", err)
	}
}

func TestBootBadName(t *testing.T) {
	for _, name := range []string{"a/b", "-x", "x-", "1x", "x_y", strings.Repeat("x", 33)} {
		if _, err := Boot(t.Context(), Options{Name: name}); err == nil || !strings.Contains(err.Error(), "name") {
			t.Errorf("Boot(Name %q) = %v; want an error about the name", name, err)
		}
	}
}
