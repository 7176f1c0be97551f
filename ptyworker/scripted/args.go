package scripted

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// Usage is the scripted agent's usage text.
const Usage = `usage: legion scripted-agent [--session-id ID | --resume ID] [--settings FILE]
       [--permission-mode MODE] [--allowedTools RULE...] [--disallowedTools RULE...] [--] [PROMPT]

A stand-in for Claude Code that writes Claude-format session files, runs the
hooks of its --settings file as Claude Code does, checks permissions, waits at
its prompt after each turn, and follows the script in $LEGION_SCRIPT (or the
file $LEGION_SCRIPT_FILE). Other Claude Code flags are accepted and ignored.
`

// ErrHelp is returned by Main for -h and --help, after printing Usage.
var ErrHelp = errors.New("help requested")

// Args are the command-line arguments the agent understands.
type Args struct {
	SessionID uuid.UUID
	Resume    bool   // --resume: the session file must exist
	Prompt    string // the positional arguments, joined by spaces
	Settings  string // --settings FILE; "" for none
	// PermissionMode is --permission-mode (bypassPermissions also for
	// --dangerously-skip-permissions); "" for the settings' defaultMode.
	PermissionMode  string
	AllowedTools    []Rule // --allowedTools / --allowed-tools
	DisallowedTools []Rule // --disallowedTools / --disallowed-tools
}

// valueFlags are Claude Code flags that take a value; they are skipped with
// it. Every other unknown flag is taken as a switch and skipped alone.
var valueFlags = map[string]bool{
	"--model": true, "--fallback-model": true, "--permission-mode": true,
	"--append-system-prompt": true, "--system-prompt": true,
	"--output-format": true, "--input-format": true, "--max-turns": true,
	"--add-dir": true, "--mcp-config": true,
	"--agents": true, "--setting-sources": true, "--permission-prompt-tool": true,
}

// ParseArgs parses Claude Code's command-line form: --session-id ID or
// --resume ID (also -r ID and the --flag=value forms), --settings FILE,
// --permission-mode MODE, --dangerously-skip-permissions, --allowedTools
// and --disallowedTools (several values each), other flags ignored, "--"
// ending flags, positional arguments forming the prompt. With neither
// session flag a random ID is chosen, as Claude Code does.
func ParseArgs(args []string) (Args, error) {
	var (
		a                 Args
		newID, resumeID   string
		haveNew, haveResm bool
		words             []string
	)
	// takeList takes the values of a flag that has several, as in Claude
	// Code: every argument up to the next flag or "--" (so a prompt after
	// them must follow "--").
	takeList := func(i int, first string, hasFirst bool) (values []string, next int) {
		if hasFirst {
			values = append(values, first)
		}
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			values = append(values, args[i])
		}
		return values, i
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			words = append(words, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			words = append(words, arg)
			continue
		}
		name, value, hasValue := strings.Cut(arg, "=")
		takeValue := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "-h", "--help":
			return Args{}, ErrHelp
		case "--session-id":
			haveNew = true
			newID, err = takeValue()
		case "--resume", "-r":
			haveResm = true
			resumeID, err = takeValue()
		case "--continue", "-c":
			err = fmt.Errorf("%s is not supported by the scripted agent; use --resume ID", name)
		case "--settings":
			a.Settings, err = takeValue()
		case "--permission-mode":
			if a.PermissionMode, err = takeValue(); err == nil {
				err = checkMode(a.PermissionMode)
			}
		case "--dangerously-skip-permissions":
			a.PermissionMode = "bypassPermissions"
		case "--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools":
			var values []string
			values, i = takeList(i, value, hasValue)
			if len(values) == 0 {
				err = fmt.Errorf("%s needs a value", name)
				break
			}
			rules, perr := parseToolList(values)
			if perr != nil {
				err = fmt.Errorf("%s: %w", name, perr)
			} else if strings.HasPrefix(name, "--allowed") {
				a.AllowedTools = append(a.AllowedTools, rules...)
			} else {
				a.DisallowedTools = append(a.DisallowedTools, rules...)
			}
		default:
			if valueFlags[name] {
				_, err = takeValue()
			}
		}
		if err != nil {
			return Args{}, err
		}
	}
	switch {
	case haveNew && haveResm:
		return Args{}, errors.New("use either --session-id or --resume, not both")
	case haveResm:
		id, err := uuid.Parse(resumeID)
		if err != nil {
			return Args{}, fmt.Errorf("--resume %q: not a session ID (a UUID)", resumeID)
		}
		a.SessionID, a.Resume = id, true
	case haveNew:
		id, err := uuid.Parse(newID)
		if err != nil {
			return Args{}, fmt.Errorf("--session-id %q: not a UUID", newID)
		}
		a.SessionID = id
	default:
		a.SessionID = uuid.New()
	}
	a.Prompt = strings.Join(words, " ")
	return a, nil
}
