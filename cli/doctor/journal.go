package doctor

import (
	"errors"

	"github.com/legion-dev/legion/internal/journal"
)

// checkJournal: can the user read their own lines in the journal (`legion
// logs`, `journalctl --user`)? Not a failure when not: Legion runs the
// same, only its story is not there to read.
func checkJournal() Check {
	c := Check{Name: CheckJournal}
	err := journal.Check()
	var ae *journal.AccessError
	switch {
	case err == nil:
		c.Status, c.Detail = OK, "you read your own lines: `legion logs TEAM [ISSUE]`, `journalctl --user LEGION_ISSUE=...`"
	case errors.As(err, &ae):
		c.Status, c.Detail, c.Fix = Warn, ae.Detail, ae.Fix
	default:
		c.Status, c.Detail, c.Fix = Warn, err.Error(), "see `journalctl --user -n 1`"
	}
	return c
}
