package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/confine"
)

// probeSandbox says whether Landlock can confine an agent here; a
// variable for tests of the fallback.
var probeSandbox = confine.Probe

// SandboxStatus says whether the permission policy "sandbox" holds on this
// machine (its agents run with their prompts off, confined by Landlock) or
// not (they run as under "allowlist"), and why: for `legion doctor` and the
// controller's log.
func SandboxStatus() confine.Status { return probeSandbox() }

// sandboxModes are the modes a sandbox confines. The controller agent
// (mode "controller") drives the helper and the tracker, which a sandbox
// puts out of its reach, and the finisher merges into the main checkout,
// which a sandbox keeps read-only: both keep allowlist.
var sandboxModes = []string{"plan", "implement", "review", "retro"}

// EffectivePolicy is the policy an agent of kind in session s runs under
// when its team's agent table is a, and its sandbox: the policy "sandbox"
// is "bypass" (no prompts) inside the sandbox of SandboxFor where that
// holds, and "allowlist" where it does not, with why: Landlock is missing
// or too old here (SandboxStatus), the sandbox would not hide what it
// must (a home below /tmp, which agents may write, as in tests), or the
// mode is the finisher's or the controller agent's.
func EffectivePolicy(a config.Agent, s Session, kind config.AgentKind) (policy config.PermissionPolicy, sandbox *api.Sandbox, why string) {
	p := a.Policy(s.Mode)
	if p != config.PermissionsSandbox {
		return p, nil, ""
	}
	switch {
	case s.Mode == "finish":
		return config.PermissionsAllowlist, nil, "the finisher keeps allowlist: it merges into the main checkout, which a sandbox keeps read-only"
	case !slices.Contains(sandboxModes, s.Mode):
		return config.PermissionsAllowlist, nil, "the " + s.Mode + " agent keeps allowlist: a sandbox would put the helper and the tracker out of its reach"
	}
	if s.Pod {
		return config.PermissionsAllowlist, nil, "on a cluster the agent keeps its prompts (allowlist): the Landlock sandbox is drawn on this machine only, not in a pod"
	}
	if st := probeSandbox(); !st.Holds {
		return config.PermissionsAllowlist, nil, "the sandbox does not hold, so the agent keeps its prompts (allowlist): " + st.Why
	}
	sb := SandboxFor(s, kind)
	if err := sb.Check(); err != nil {
		return config.PermissionsAllowlist, nil, "the sandbox does not hold, so the agent keeps its prompts (allowlist): " + err.Error()
	}
	return config.PermissionsBypass, sb, ""
}

// applyPolicy is the policy a kind prepares s with (see EffectivePolicy),
// and records in l the sandbox, or why the policy "sandbox" is not one.
func ApplyPolicy(a config.Agent, s Session, kind config.AgentKind, l *Launch) config.PermissionPolicy {
	policy, sb, why := EffectivePolicy(a, s, kind)
	l.Sandbox, l.PolicyNote = sb, why
	return policy
}

// secrets are what no sandboxed agent reads, relative to its home:
// other tools' keys and credentials.
var secrets = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".config/gh", ".config/hub",
	".netrc", ".git-credentials", ".config/git/credentials", ".docker/config.json",
	".kube", ".password-store", ".pypirc", ".npmrc", ".cargo/credentials", ".cargo/credentials.toml",
	".terraform.d/credentials.tfrc.json", ".vault-token",
}

// kindCredentials are each kind's own login, relative to the home: usable
// by its own kind's agents, hidden from the others.
var kindCredentials = map[config.AgentKind]string{
	config.AgentClaude:   ".claude/.credentials.json",
	config.AgentCodex:    ".codex/auth.json",
	config.AgentGemini:   ".gemini/oauth_creds.json",
	config.AgentOpencode: ".local/share/opencode/auth.json",
}

// SandboxFor is what an agent of kind in session s may touch under the
// policy "sandbox":
//
//   - write: the worktree; of the repository's git directory only
//     what a commit in the worktree writes (objects, refs, logs, and the
//     worktree's own directory: not its config or hooks, which Legion's
//     own git commands would run); the session's directory and the
//     kind's conversation home beside it; the kind's own state (claude:
//     ~/.claude and ~/.claude.json; opencode: its data, state and config
//     directories; codex and gemini: their login file, refreshed in
//     place); the toolchains' caches (~/.cache with Go's build cache and
//     pip's, the Go module cache, ~/.npm, cargo's registry and git); /tmp
//     and /var/tmp;
//   - read: everything else, but what it hides;
//   - hide: other tools' credentials (~/.ssh, ~/.gnupg, ~/.aws, gh's,
//     docker's, kube's, ~/.netrc and the like), the other kinds' logins,
//     Legion's state (every session's spec and token, the trackers), its
//     config directory (token files) and the team's tracker credentials
//     files (Session.Secrets).
func SandboxFor(s Session, kind config.AgentKind) *api.Sandbox {
	home := s.Home
	env := func(key, def string) string {
		if v, ok := s.Getenv(key); ok && filepath.IsAbs(v) {
			return filepath.Clean(v)
		}
		return def
	}
	h := func(rel string) string { return filepath.Join(home, rel) }
	cache := env("XDG_CACHE_HOME", h(".cache"))
	gopath := env("GOPATH", h("go"))
	if i := strings.IndexByte(gopath, os.PathListSeparator); i >= 0 {
		gopath = gopath[:i]
	}
	modcache := env("GOMODCACHE", filepath.Join(gopath, "pkg", "mod"))
	caches := []string{cache, modcache, h(".npm")}
	sb := &api.Sandbox{Read: []string{"/"}}
	sb.Write = append(sb.Write, filepath.Clean(s.Cwd))
	sb.Write = append(sb.Write, GitWritable(s.Cwd)...)
	sb.Write = append(sb.Write, filepath.Clean(s.Dir), ConversationHome(s.Dir, string(kind), s.ID))
	switch kind {
	case config.AgentClaude:
		sb.Write = append(sb.Write, h(".claude"), h(".claude.json"))
		caches = append(caches, h(".claude")) // made when missing: the CLI cannot make it in the home
	case config.AgentOpencode:
		data := env("XDG_DATA_HOME", h(".local/share"))
		state := env("XDG_STATE_HOME", h(".local/state"))
		conf := env("XDG_CONFIG_HOME", h(".config"))
		// Made when missing: the CLI makes them at its start (mkdir -p),
		// which the home's parents do not allow (opencode FACTS O26).
		caches = append(caches, filepath.Join(data, "opencode"), filepath.Join(state, "opencode"), filepath.Join(conf, "opencode"))
	case config.AgentCodex, config.AgentGemini:
		sb.Write = append(sb.Write, h(kindCredentials[kind]))
	}
	if v := env("GOCACHE", ""); v != "" {
		caches = append(caches, v)
	}
	sb.Write = append(sb.Write, caches...)
	sb.Write = append(sb.Write, h(".cargo/registry"), h(".cargo/git"), "/tmp", "/var/tmp")
	sb.MakeDirs = caches
	for _, rel := range secrets {
		sb.Hide = append(sb.Hide, h(rel))
	}
	for k, rel := range kindCredentials {
		if k != kind {
			sb.Hide = append(sb.Hide, h(rel))
		}
	}
	slices.Sort(sb.Hide[len(secrets):]) // the map's order is random
	state := env("XDG_STATE_HOME", h(".local/state"))
	sb.Hide = append(sb.Hide, filepath.Join(state, "legion"))
	// Legion's config dir: its token files and any key kept beside
	// legion.toml (the agent's legion commands need none of it: its
	// tracker commands run in its worker, its hooks need only their
	// environment), and the team's tracker credentials files.
	sb.Hide = append(sb.Hide, filepath.Join(env("XDG_CONFIG_HOME", h(".config")), "legion"))
	for _, p := range s.Secrets {
		if filepath.IsAbs(p) {
			sb.Hide = append(sb.Hide, filepath.Clean(p))
		}
	}
	sb.Write = dedupe(sb.Write)
	return sb
}

// gitWritable is what a commit in the worktree cwd writes in the
// repository's git directory: its objects, refs and logs, and the
// worktree's own directory (HEAD, index). Nothing when cwd has no .git
// file (a main checkout writes its own .git, which is below cwd).
func GitWritable(cwd string) []string {
	b, err := os.ReadFile(filepath.Join(cwd, ".git"))
	if err != nil {
		return nil
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return nil
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(cwd, gitdir)
	}
	gitdir = filepath.Clean(gitdir)
	common := filepath.Dir(filepath.Dir(gitdir)) // <common>/worktrees/<name>
	if c, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		common = strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		common = filepath.Clean(common)
	}
	return []string{gitdir, filepath.Join(common, "objects"), filepath.Join(common, "refs"), filepath.Join(common, "logs")}
}

// dedupe keeps the first of equal paths, in order.
func dedupe(ps []string) []string {
	var out []string
	for _, p := range ps {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
