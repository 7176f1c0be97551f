package claudecode

import (
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/google/uuid"
)

// maxEncodedLen is where Claude Code truncates an encoded project directory
// name (MAX_SANITIZED_LENGTH in its source), in UTF-16 code units.
const maxEncodedLen = 200

// EncodeProjectPath is the directory name Claude Code uses for a working
// directory under ~/.claude/projects: every character outside [A-Za-z0-9]
// becomes '-' (so "/home/u/.dotfiles" is "-home-u--dotfiles").
//
// It follows Claude Code's JavaScript exactly: the replacement runs per
// UTF-16 code unit, so a character outside the Basic Multilingual Plane (an
// emoji) becomes two dashes. Names longer than 200 code units are cut to 200
// and get "-" plus a base-36 hash of cwd appended; the hash is the one of
// Claude Code's Node build (a 32-bit "h*31+c" string hash). Its Bun-compiled
// native build hashes differently, so for such long paths the name only
// matches Node installs. Legion's workspaces are far shorter.
//
// cwd is used as given. Claude Code uses its physical working directory
// (symlinks resolved), so callers pass filepath.EvalSymlinks of the
// workspace when it may contain symlinks.
func EncodeProjectPath(cwd string) string {
	units := utf16.Encode([]rune(cwd))
	var b strings.Builder
	b.Grow(len(units))
	for _, u := range units {
		if ('a' <= u && u <= 'z') || ('A' <= u && u <= 'Z') || ('0' <= u && u <= '9') {
			b.WriteByte(byte(u))
		} else {
			b.WriteByte('-')
		}
	}
	s := b.String() // ASCII only: one byte per UTF-16 unit
	if len(s) <= maxEncodedLen {
		return s
	}
	return s[:maxEncodedLen] + "-" + jsStringHash(units)
}

// jsStringHash is Claude Code's simpleHash: h = h*31 + unit over the UTF-16
// units with 32-bit wraparound, then Math.abs(h).toString(36).
func jsStringHash(units []uint16) string {
	var h int32
	for _, u := range units {
		h = (h << 5) - h + int32(u)
	}
	v := int64(h)
	if v < 0 {
		v = -v
	}
	return strconv.FormatInt(v, 36)
}

// ProjectDir is the directory holding the session files of agents started
// in cwd: <home>/.claude/projects/<EncodeProjectPath(cwd)>.
func ProjectDir(home, cwd string) string {
	return filepath.Join(home, ".claude", "projects", EncodeProjectPath(cwd))
}

// ResumeMarker is in a session file once it holds a user message (compact
// JSON; inside a string the quotes would be escaped). Before that the
// file holds only the lines Claude Code writes at its start, and `claude
// --resume` of it says "No conversation found" and exits 1 (agent/claude
// FACTS F13a).
const ResumeMarker = `"type":"user"`

// SessionFile is the session file of session id started in cwd:
// <ProjectDir(home, cwd)>/<id>.jsonl.
func SessionFile(home, cwd string, id uuid.UUID) string {
	return filepath.Join(ProjectDir(home, cwd), id.String()+".jsonl")
}

// SubagentDir is where Claude Code 2.x keeps the subagent files of the
// session whose file is sessionFile: <dir>/<session>/subagents, each
// subagent in its own *.jsonl.
func SubagentDir(sessionFile string) string {
	return filepath.Join(strings.TrimSuffix(sessionFile, ".jsonl"), "subagents")
}
