package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Errors of Check and Read, to branch on with errors.Is.
var (
	// ErrNoJournald: journald does not run here (no journal socket), so
	// nothing Legion logs is kept.
	ErrNoJournald = errors.New("no journald")
	// ErrVolatile: the journal is kept in /run only, where every user's
	// lines go to the system journal: `journalctl --user` shows nothing.
	ErrVolatile = errors.New("the journal is volatile")
	// ErrPermission: the user cannot read the journal file their lines
	// are in.
	ErrPermission = errors.New("insufficient permissions")
)

// FixPersistent is what makes the journal persistent, so that each user
// reads their own lines (journald then writes user-UID.journal, readable by
// that user). Tested on systemd 252: no restart needed, only the flush; the
// lines logged before stay in the volatile journal.
const FixPersistent = "sudo mkdir -p /var/log/journal && sudo systemd-tmpfiles --create --prefix /var/log/journal && sudo journalctl --flush " +
	"(if journald.conf sets Storage=volatile or none, set Storage=persistent in /etc/systemd/journald.conf.d/legion.conf and `sudo systemctl restart systemd-journald`)"

// layout is where journald keeps its files and socket.
type layout struct {
	socket    string // the native protocol's socket
	machineID string // /etc/machine-id
	runDir    string // volatile journal: /run/log/journal
	varDir    string // persistent journal: /var/log/journal
}

var systemLayout = layout{
	socket:    "/run/systemd/journal/socket",
	machineID: "/etc/machine-id",
	runDir:    "/run/log/journal",
	varDir:    "/var/log/journal",
}

// Check reports whether this process's user can read their own lines in
// the journal, both with `legion logs` and with `journalctl --user`. It
// tells a volatile journal from a persistent one by journald's files (a
// persistent one has /var/log/journal/MACHINE/system.journal), so a
// journald.conf that sets Storage=volatile over an old persistent
// directory is taken for persistent. It returns nil
// when they can; an error reading /etc/machine-id; otherwise an
// *AccessError (what was found, and what to do) that wraps
//   - ErrNoJournald when journald does not run;
//   - ErrVolatile when the journal is volatile: alone when the user reads
//     the system journal (root, or in the systemd-journal or adm group), so
//     `legion logs` works and `journalctl --user` does not; together with
//     ErrPermission when the user reads neither;
//   - ErrPermission when the user's own journal file is not readable to them.
func Check() error { return systemLayout.check(os.Getuid()) }

// AccessError is Check's error: what is wrong, why, and what to do.
type AccessError struct {
	Kinds  []error // ErrNoJournald, ErrVolatile, ErrPermission: what errors.Is finds
	Detail string  // what was found
	Fix    string  // what to do
}

func (e *AccessError) Error() string {
	msg := make([]string, len(e.Kinds))
	for i, k := range e.Kinds {
		msg[i] = k.Error()
	}
	return strings.Join(msg, ", ") + ": " + e.Detail + ": " + e.Fix
}

func (e *AccessError) Unwrap() []error { return e.Kinds }

// fixGroup is the other way for a volatile journal: the systemd-journal
// group reads the system journal; `journalctl --user` still opens only the
// user's own files, which a volatile journal does not have.
const fixGroup = "or add yourself to the systemd-journal group (`sudo usermod -aG systemd-journal $USER`, then log in again): " +
	"then `legion logs` works, but `journalctl --user` still does not"

func (l layout) check(uid int) error {
	if _, err := os.Stat(l.socket); err != nil {
		return &AccessError{Kinds: []error{ErrNoJournald},
			Detail: l.socket + " does not exist, so nothing Legion logs is kept (journalctl --user shows nothing)",
			Fix:    "run Legion on a system booted with systemd (systemd-journald running)"}
	}
	id, err := os.ReadFile(l.machineID)
	if err != nil {
		return fmt.Errorf("journal: read the machine ID: %w", err)
	}
	mid := strings.TrimSpace(string(id))
	if mid == "" || strings.ContainsAny(mid, "/.") {
		return fmt.Errorf("journal: %s: %q is not a machine ID", l.machineID, mid)
	}
	runSys := filepath.Join(l.runDir, mid, "system.journal")
	varDir := filepath.Join(l.varDir, mid)
	if _, err := os.Stat(filepath.Join(varDir, "system.journal")); err != nil {
		if _, err := os.Stat(filepath.Join(l.runDir, mid)); err != nil {
			return &AccessError{Kinds: []error{ErrVolatile},
				Detail: "journald keeps no journal files (neither " + filepath.Join(l.runDir, mid) + " nor " + varDir + ": Storage=none in journald.conf?)",
				Fix:    "make the journal persistent: " + FixPersistent}
		}
		// The journal is volatile: journald writes every line to /run's
		// system journal (a user's own file is for a persistent journal only).
		if uid == 0 || readable(runSys) {
			return &AccessError{Kinds: []error{ErrVolatile},
				Detail: "the journal is kept in /run only, where your lines are in " + runSys + ", which you read (as root or in the systemd-journal or adm group): `legion logs` works, `journalctl --user` shows nothing",
				Fix:    "make the journal persistent: " + FixPersistent}
		}
		return &AccessError{Kinds: []error{ErrVolatile, ErrPermission},
			Detail: "the journal is kept in /run only, where your lines go to " + runSys + ", which only root and the systemd-journal and adm groups read: neither `legion logs` nor `journalctl --user` shows them",
			Fix:    "make the journal persistent: " + FixPersistent + "; " + fixGroup}
	}
	if uid == 0 {
		return nil
	}
	own := filepath.Join(varDir, "user-"+strconv.Itoa(uid)+".journal")
	if _, err := os.Stat(own); err != nil {
		// Nothing of uid's logged yet: journald makes the file, readable by
		// uid, with the first line.
		return nil
	}
	if !readable(own) {
		return &AccessError{Kinds: []error{ErrPermission},
			Detail: "you cannot read your own journal " + own + " (journald gives its user a read ACL: see `getfacl " + own + "`)",
			Fix:    "`sudo systemd-tmpfiles --create --prefix /var/log/journal` and `sudo journalctl --rotate`"}
	}
	return nil
}

// ownFileMissing reports, for a user other than root, whether the journal
// is persistent and has no file of theirs (nothing of theirs was logged
// yet), and names that file.
func (l layout) ownFileMissing(uid int) (string, bool) {
	if uid == 0 {
		return "", false
	}
	id, err := os.ReadFile(l.machineID)
	if err != nil {
		return "", false
	}
	dir := filepath.Join(l.varDir, strings.TrimSpace(string(id)))
	if _, err := os.Stat(filepath.Join(dir, "system.journal")); err != nil {
		return "", false
	}
	own := filepath.Join(dir, "user-"+strconv.Itoa(uid)+".journal")
	_, err = os.Stat(own)
	return own, errors.Is(err, os.ErrNotExist)
}

// readable reports whether this process can open path for reading.
func readable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	f.Close()
	return true
}
