// Package unitname holds Legion's unit names and systemd's unit-name
// escaping: the names of Legion's static units, of each team's controller
// instance and slice, and of each worker (legion-<short>-<issue>-<mode>),
// built and parsed back. It is pure string work and imports no D-Bus
// client, so that the controller can name units without linking one (it
// reaches systemd only through the helper).
package unitname

import (
	"errors"
	"fmt"
	"strings"
)

// Names of Legion's static units.
const (
	SocketUnit         = "legion.socket"      // the helper's listening socket
	HelperUnit         = "legion.service"     // the helper, started by SocketUnit
	ControllerTemplate = "legion@.service"    // one instance per team: legion@<team>.service
	RootSlice          = "legion.slice"       // parent of every team slice (implicit, no file)
	WebSocketUnit      = "legion-web.socket"  // the dashboard's listening sockets
	WebUnit            = "legion-web.service" // the dashboard's server, started by WebSocketUnit
)

// UnitNameMax is the longest unit name systemd accepts (UNIT_NAME_MAX - 1
// in systemd's unit-name.h).
const UnitNameMax = 255

// validChars are the bytes systemd keeps as they are when escaping a unit
// name part (VALID_CHARS in unit-name.h minus '-' and '\', which it escapes).
const validChars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:_."

// Escape escapes s for use in a unit name exactly like `systemd-escape s`
// (systemd's unit_name_escape): '/' becomes '-', a leading '.', every '-',
// '\' and every byte outside [0-9A-Za-z:_.] becomes \xNN (two lowercase hex
// digits, byte-wise, so UTF-8 is escaped per byte). Escape("") is "".
//
// go-systemd's unit.UnitNameEscape differs for bytes below 0x10 (it writes
// \x9, systemd writes \x09), and its unescape cannot decode bytes above
// 0x7f, so Legion does not use it.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case i == 0 && c == '.', strings.IndexByte(validChars, c) < 0:
			escapeByte(&b, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func escapeByte(b *strings.Builder, c byte) {
	const hex = "0123456789abcdef"
	b.WriteString(`\x`)
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}

// ErrBadEscape is returned (wrapped) by Unescape for a '\' that does not
// start a \xNN sequence.
var ErrBadEscape = errors.New(`bad escape: want \x and two hex digits`)

// Unescape reverses Escape like `systemd-escape --unescape` (systemd's
// unit_name_unescape): '-' becomes '/', \xNN (either case) becomes the byte
// NN. A '\' not followed by 'x' and two hex digits is an error wrapping
// ErrBadEscape. Unlike systemd, which works on C strings, \x00 decodes to a
// NUL byte instead of ending the string; Escape only writes \x00 for an
// input that held a NUL.
func Unescape(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '-':
			b.WriteByte('/')
		case '\\':
			if i+3 >= len(s) || s[i+1] != 'x' {
				return "", fmt.Errorf("unescape %q at byte %d: %w", s, i, ErrBadEscape)
			}
			hi, lo := unhex(s[i+2]), unhex(s[i+3])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("unescape %q at byte %d: %w", s, i, ErrBadEscape)
			}
			b.WriteByte(byte(hi<<4 | lo))
			i += 3
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// unitTypes are the suffixes systemd knows (unit_type_table).
var unitTypes = map[string]bool{
	"service": true, "mount": true, "swap": true, "socket": true,
	"target": true, "device": true, "automount": true, "timer": true,
	"path": true, "slice": true, "scope": true,
}

// NameKind says which shapes of unit name ValidName accepts.
type NameKind uint8

// Kinds of unit names, combinable with |.
const (
	NamePlain    NameKind = 1 << iota // foo.service
	NameInstance                      // foo@bar.service
	NameTemplate                      // foo@.service
	NameAny      = NamePlain | NameInstance | NameTemplate
)

// ValidName reports whether name is a unit name of one of the given kinds,
// by the rules of systemd's unit_name_is_valid: at most UnitNameMax bytes, a
// known type suffix, and before it only [0-9A-Za-z:_.\-@] with a non-empty
// prefix before the first '@'.
func ValidName(name string, kinds NameKind) bool {
	if name == "" || len(name) > UnitNameMax {
		return false
	}
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 || !unitTypes[name[dot+1:]] {
		return false
	}
	at := -1
	for i := 0; i < dot; i++ {
		c := name[i]
		if c == '@' && at < 0 {
			at = i
		}
		if c != '@' && c != '-' && c != '\\' && strings.IndexByte(validChars, c) < 0 {
			return false
		}
	}
	switch {
	case at == 0:
		return false
	case at < 0:
		return kinds&NamePlain != 0
	case dot > at+1:
		return kinds&NameInstance != 0
	default:
		return kinds&NameTemplate != 0
	}
}

// ControllerUnit is the name of team's controller instance,
// "legion@<Escape(team)>.service", as `systemd-escape
// --template=legion@.service team` prints it. Inside the unit %i is the
// escaped team name and %I the team name. An empty team name, one holding a
// NUL byte, or one whose unit name would pass UnitNameMax is an error.
func ControllerUnit(team string) (string, error) {
	if err := checkPart("team name", team); err != nil {
		return "", err
	}
	name := "legion@" + Escape(team) + ".service"
	if len(name) > UnitNameMax {
		return "", fmt.Errorf("team name %q: unit name %s is %d bytes long, systemd allows %d", team, truncate(name), len(name), UnitNameMax)
	}
	return name, nil
}

// ParseControllerUnit returns the team of a controller instance name
// (the inverse of ControllerUnit).
func ParseControllerUnit(name string) (string, error) {
	inst, ok := strings.CutPrefix(name, "legion@")
	if ok {
		inst, ok = strings.CutSuffix(inst, ".service")
	}
	if !ok || inst == "" || !ValidName(name, NameInstance) {
		return "", fmt.Errorf("unit %q: not a Legion controller (want legion@<escaped team>.service)", name)
	}
	team, err := Unescape(inst)
	if err == nil {
		err = checkPart("team name", team)
	}
	if err != nil {
		return "", fmt.Errorf("unit %q: %w", name, err)
	}
	return team, nil
}

// dropInName is the file name of a team's drop-in in legion@<team>.service.d/.
const dropInName = "50-legion.conf"

// DropInPath is where install writes a team's settings for its controller,
// relative to the unit directory: "legion@<escaped>.service.d/50-legion.conf".
func DropInPath(team string) (string, error) {
	unit, err := ControllerUnit(team)
	if err != nil {
		return "", err
	}
	return unit + ".d/" + dropInName, nil
}

// CheckShortID reports whether short is a team short ID: the first 8 hex
// characters (lowercase) of the team's UUID.
func CheckShortID(short string) error {
	if len(short) != 8 || strings.Trim(short, "0123456789abcdef") != "" {
		return fmt.Errorf("team short id %q: want 8 lowercase hex characters (the start of the team's UUID)", short)
	}
	return nil
}

// TeamSlice is the name of a team's slice, "legion-<short>.slice". A '-' in
// a slice name means nesting, so this slice is a child of RootSlice
// (legion.slice), which systemd creates implicitly.
func TeamSlice(short string) (string, error) {
	if err := CheckShortID(short); err != nil {
		return "", err
	}
	return "legion-" + short + ".slice", nil
}

// WorkerUnit is the name of the transient unit of one agent session,
// "legion-<short>-<issue>-<mode>.service", with issue and mode escaped like
// Escape except that '/' too becomes \x2f: Escape would turn it into '-',
// the separator here. Unescape (and `systemd-escape --unescape`) still
// decodes each part back. Empty parts, NUL bytes and names longer than
// UnitNameMax are errors.
func WorkerUnit(short, issue, mode string) (string, error) {
	if err := CheckShortID(short); err != nil {
		return "", err
	}
	if err := checkPart("issue", issue); err != nil {
		return "", err
	}
	if err := checkPart("mode", mode); err != nil {
		return "", err
	}
	name := "legion-" + short + "-" + escapePart(issue) + "-" + escapePart(mode) + ".service"
	if len(name) > UnitNameMax {
		return "", fmt.Errorf("issue %q mode %q: unit name %s is %d bytes long, systemd allows %d", issue, mode, truncate(name), len(name), UnitNameMax)
	}
	return name, nil
}

// WorkerDropInPath is where install writes the settings of every worker
// of a team, relative to the unit directory:
// "legion-<short>-.service.d/50-legion.conf". systemd applies a drop-in
// directory named after a prefix of a unit's name up to a '-' to every unit
// with that prefix, transient units included, so this one reaches each
// legion-<short>-<issue>-<mode>.service (WorkerUnit) of the team.
func WorkerDropInPath(short string) (string, error) {
	if err := CheckShortID(short); err != nil {
		return "", err
	}
	return "legion-" + short + "-.service.d/" + dropInName, nil
}

// ParseWorkerUnit splits a worker unit name back into the team short ID,
// the issue and the mode (the inverse of WorkerUnit).
func ParseWorkerUnit(name string) (short, issue, mode string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("unit %q: not a Legion worker (want legion-<short>-<issue>-<mode>.service): %s", name, why)
	}
	rest, ok := strings.CutPrefix(name, "legion-")
	if ok {
		rest, ok = strings.CutSuffix(rest, ".service")
	}
	if !ok {
		return "", "", "", bad("wrong prefix or suffix")
	}
	if !ValidName(name, NamePlain) {
		return "", "", "", bad("invalid unit name")
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return "", "", "", bad(fmt.Sprintf("%d '-'-separated parts, want 3", len(parts)))
	}
	if err := CheckShortID(parts[0]); err != nil {
		return "", "", "", bad(err.Error())
	}
	if parts[1] == "" || parts[2] == "" {
		return "", "", "", bad("empty issue or mode")
	}
	if issue, err = Unescape(parts[1]); err == nil {
		err = checkPart("issue", issue)
	}
	if err != nil {
		return "", "", "", fmt.Errorf("unit %q: %w", name, err)
	}
	if mode, err = Unescape(parts[2]); err == nil {
		err = checkPart("mode", mode)
	}
	if err != nil {
		return "", "", "", fmt.Errorf("unit %q: %w", name, err)
	}
	return parts[0], issue, mode, nil
}

func escapePart(s string) string {
	return strings.ReplaceAll(Escape(s), "-", `\x2f`)
}

func checkPart(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%s %q holds a NUL byte", what, s)
	}
	return nil
}

func truncate(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:37] + "..."
}
