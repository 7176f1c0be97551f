package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/internal/atomicfile"
)

// AddTeam adds the team name with a fresh UUID and the absolute path of
// workspace (an existing directory) to the config file at path, and returns
// the team as loaded. It appends a [teams.<name>] table and leaves the rest
// of the file byte for byte as it was; a missing file (and its directory,
// 0700) is created with mode 0600, an existing one keeps its mode. The file
// is replaced atomically, under a lock on its directory. A taken name is an
// error wrapping ErrTeamExists; a file that does not load is an error and is
// not touched.
//
// agent, when not empty, is the absolute path of DefaultAgentProgram (the
// caller found it in its PATH): the table then sets agent.new and
// agent.resume to the defaults with that path as the program, since
// workers look a bare name up in the user manager's PATH, which often
// lacks the directory (~/.local/bin for Claude Code's installer).
func AddTeam(path, name, workspace, agent string) (Team, error) {
	return AddTeamOfKind(path, name, workspace, AgentClaude, agent)
}

// AddTeamOfKind is AddTeam for a team whose agents are of kind (agent.kind;
// "" or claude for Claude Code): a kind other than claude is written as
// agent.kind, and agent, if not empty, goes into that kind's default
// agent.new and agent.resume (KindArgv).
func AddTeamOfKind(path, name, workspace string, kind AgentKind, agent string) (Team, error) {
	return AddTeamWith(path, NewTeam{Name: name, Workspace: workspace, Kind: kind, Agent: agent})
}

// NewTeam is what AddTeamWith writes.
type NewTeam struct {
	Name, Workspace string
	Kind            AgentKind
	Agent           string // the kind's program by absolute path, or ""
	// GitHub, "owner/name", makes the repository's issues the team's
	// tracker (tracker = "github", github.repo).
	GitHub string
}

// AddTeamWith is AddTeamOfKind with the team's tracker on GitHub when
// n.GitHub is set.
func AddTeamWith(path string, n NewTeam) (Team, error) {
	name, workspace, kind, agent := n.Name, n.Workspace, n.Kind, n.Agent
	if owner, repo, ok := strings.Cut(n.GitHub, "/"); n.GitHub != "" && (!ok || owner == "" || repo == "" || strings.ContainsAny(repo, "/ \t\n\"")) {
		return Team{}, fmt.Errorf("add team %q: GitHub repository %q: want owner/name", name, n.GitHub)
	}
	if _, err := agentKindValue(string(kind)); kind != "" && err != nil {
		return Team{}, fmt.Errorf("add team %q: %w", name, err)
	}
	if err := CheckTeamName(name); err != nil {
		return Team{}, fmt.Errorf("add team: %w", err)
	}
	ws, err := absWorkspace(workspace)
	if err != nil {
		return Team{}, fmt.Errorf("add team %q: %w", name, err)
	}
	if agent != "" && (!filepath.IsAbs(agent) || !utf8.ValidString(agent)) {
		return Team{}, fmt.Errorf("add team %q: agent program %q: want an absolute UTF-8 path", name, agent)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Team{}, fmt.Errorf("add team %q: create config dir: %w", name, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return Team{}, fmt.Errorf("add team %q: %w", name, err)
	}
	defer unlock()

	target, err := resolveLink(path)
	if err != nil {
		return Team{}, fmt.Errorf("add team %q: %w", name, err)
	}
	mode := fs.FileMode(0o600)
	data, err := os.ReadFile(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Team{}, fmt.Errorf("add team %q: %w", name, err)
	default:
		fi, err := os.Stat(target)
		if err != nil {
			return Team{}, fmt.Errorf("add team %q: %w", name, err)
		}
		mode = fi.Mode().Perm()
	}
	cfg, err := Parse(path, data)
	if err != nil {
		return Team{}, fmt.Errorf("add team %q: %s does not load; fix it first:\n%w", name, path, err)
	}
	if _, ok := cfg.Team(name); ok {
		return Team{}, fmt.Errorf("add team %q to %s: %w", name, path, ErrTeamExists)
	}
	id := newTeamID(cfg)

	var b bytes.Buffer
	b.Write(data)
	if len(data) > 0 {
		if !bytes.HasSuffix(data, []byte("\n")) {
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[teams.%s]\nid = %s\nworkspace = %s\n", quoteKey(name), quoteString(id.String()), quoteString(ws))
	argvNew, argvResume := defaultAgentNew, defaultAgentResume
	if n, r, ok := KindArgv(kind); ok {
		argvNew, argvResume = n, r
		fmt.Fprintf(&b, "agent.kind = %s\n", quoteString(string(kind)))
	}
	if agent != "" {
		fmt.Fprintf(&b, "agent.new = %s\nagent.resume = %s\n", argvWithProgram(argvNew, agent), argvWithProgram(argvResume, agent))
	}
	if n.GitHub != "" {
		fmt.Fprintf(&b, "tracker = \"github\"\ngithub.repo = %s\n", quoteString(n.GitHub))
	}

	cfg, err = Parse(path, b.Bytes())
	if err != nil {
		return Team{}, fmt.Errorf("add team %q: the file would not load with the new table (is [teams] written as an inline table?):\n%w", name, err)
	}
	t, ok := cfg.Team(name)
	if !ok {
		return Team{}, fmt.Errorf("add team %q: the new table did not define the team", name)
	}
	if err := atomicfile.Write(target, b.Bytes(), mode); err != nil {
		return Team{}, fmt.Errorf("add team %q: write %s: %w", name, target, err)
	}
	return t, nil
}

// DefaultAgentProgram is the program of the default agent.new and
// agent.resume, Claude Code's CLI, which `legion team add` looks up.
func DefaultAgentProgram() string { return defaultAgentNew[0] }

// AgentProgram is the program kind runs unless a team says otherwise:
// "claude", "codex", "gemini" or "opencode" ("" for custom, which has none).
func AgentProgram(kind AgentKind) string {
	if n, _, ok := KindArgv(kind); ok {
		return n[0]
	}
	if kind == AgentCustom {
		return ""
	}
	return defaultAgentNew[0]
}

// argvWithProgram writes argv as a TOML array with prog as its program.
func argvWithProgram(argv []string, prog string) string {
	words := []string{quoteString(prog)}
	for _, a := range argv[1:] {
		words = append(words, quoteString(a))
	}
	return "[" + strings.Join(words, ", ") + "]"
}

// absWorkspace makes workspace absolute and checks it is a directory with a
// name TOML can hold.
func absWorkspace(workspace string) (string, error) {
	if workspace == "" {
		return "", errors.New("no workspace: expected the directory of the team's git repository")
	}
	if strings.HasPrefix(workspace, "~/") || workspace == "~" {
		w, err := expandHome(workspace)
		if err != nil {
			return "", err
		}
		workspace = w
	}
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", workspace, err)
	}
	if !utf8.ValidString(ws) {
		return "", fmt.Errorf("workspace %q: expected a UTF-8 path (TOML cannot hold others)", ws)
	}
	if err := checkDir(ws); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return ws, nil
}

// newTeamID returns a random UUID whose short id no team of cfg has.
func newTeamID(cfg *Config) uuid.UUID {
	for {
		id := uuid.New()
		taken := false
		for _, t := range cfg.Teams {
			taken = taken || t.ShortID() == id.String()[:8]
		}
		if !taken {
			return id
		}
	}
}

// lockDir takes an exclusive flock on dir, so concurrent AddTeams do not
// lose each other's tables. The returned func releases it.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock config dir: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock config dir %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// resolveLink follows path if it is a symlink, so that replacing the file
// keeps the link.
func resolveLink(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("config %s is a symlink that does not resolve: %w", path, err)
	}
	return target, nil
}

// quoteKey writes a table key part: bare when it can be, else quoted.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for i := 0; i < len(k); i++ {
		if !isBareKeyChar(k[i]) {
			return quoteString(k)
		}
	}
	return k
}

// quoteString writes s as a TOML basic string. s must be valid UTF-8.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
