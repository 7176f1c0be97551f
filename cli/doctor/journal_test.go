package doctor

import (
	"os"
	"testing"
)

// TestJournalCheck: without journald (this machine kind's bare sandbox)
// the journal check warns that nothing is kept, and says what to do;
// with journald it is ok or a warning with its fix. internal/journal's
// TestJournald checks each case (volatile, persistent, root, another
// user) against a real journald.
func TestJournalCheck(t *testing.T) {
	c := checkJournal()
	if _, err := os.Stat("/run/systemd/journal/socket"); err != nil {
		expect(t, c, Warn, "/run/systemd/journal/socket does not exist", "systemd-journald")
		return
	}
	if c.Status == Warn {
		expect(t, c, Warn, "", "journal")
	} else {
		expect(t, c, OK, "you read your own lines", "")
	}
}
