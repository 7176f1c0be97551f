package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/legion-dev/legion/units/hardening"
)

// sep joins key parts into map keys; TOML keys may contain any other
// character, including '.'.
const sep = "\x00"

func joinKey(parts []string) string { return strings.Join(parts, sep) }

// schemaIndex maps each table of the schema to its settings by joined key,
// and to the table prefixes that hold settings ("linear", "agent"). It is
// built on first use rather than at start: most commands read no file.
var schemaIndex = sync.OnceValues(func() (map[string]map[string]*Setting, map[string]map[string]bool) {
	idx := map[string]map[string]*Setting{}
	sub := map[string]map[string]bool{}
	for i := range Schema {
		s := &Schema[i]
		if idx[s.Table] == nil {
			idx[s.Table], sub[s.Table] = map[string]*Setting{}, map[string]bool{}
		}
		parts := strings.Split(s.Key, ".")
		idx[s.Table][joinKey(parts)] = s
		for n := 1; n < len(parts); n++ {
			sub[s.Table][joinKey(parts[:n])] = true
		}
	}
	return idx, sub
})

// decoder collects every problem of one file.
type decoder struct {
	file    string
	loc     *locator
	errs    []*Error
	defined map[string]bool // joined full keys that were set
}

// decodeFile parses and validates data, the contents of file.
func decodeFile(file string, data []byte) (*Config, error) {
	var raw map[string]any
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: file, Line: pe.Position.Line, Column: pe.Position.Col, Err: &syntaxError{pe}}
		}
		return nil, &Error{File: file, Err: err}
	}
	d := &decoder{file: file, loc: newLocator(string(data), md.Keys()), defined: map[string]bool{}}
	cfg := d.config(raw)
	if len(d.errs) == 0 {
		return cfg, nil
	}
	lineOrder := func(e *Error) int { // unknown lines last
		if e.Line == 0 {
			return math.MaxInt
		}
		return e.Line
	}
	slices.SortStableFunc(d.errs, func(a, b *Error) int { return cmp.Compare(lineOrder(a), lineOrder(b)) })
	if len(d.errs) == 1 {
		return nil, d.errs[0]
	}
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return nil, errors.Join(errs...)
}

// errorAt records err for the key path.
func (d *decoder) errorAt(path []string, err error) {
	d.errs = append(d.errs, &Error{File: d.file, Line: d.loc.line(path), Key: keyString(path), Err: err})
}

func (d *decoder) isDefined(path ...string) bool { return d.defined[joinKey(path)] }

// config decodes the whole document.
func (d *decoder) config(raw map[string]any) *Config {
	cfg := &Config{Path: d.file, Helper: defaultHelper(), Worker: defaultWorker(), Web: defaultWeb(), Defaults: defaultTeam()}
	d.section(raw, "helper", TableHelper, &cfg.Helper)
	d.section(raw, "worker", TableWorker, &cfg.Worker)
	d.section(raw, "web", TableWeb, &cfg.Web)
	cfg.Defaults.MachineSessionLimit = cfg.Helper.SessionLimit
	if d.section(raw, "defaults", TableTeam, &cfg.Defaults) {
		d.kindDefaults(&cfg.Defaults, []string{"defaults"}, "")
		d.crossCheck(&cfg.Defaults, []string{"defaults"})
	}
	if v, ok := raw["teams"]; ok {
		d.teams(cfg, v)
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch k {
		case "helper", "worker", "web", "defaults", "teams":
		default:
			d.errorAt([]string{k}, errors.New("unknown key: expected the tables [helper], [worker], [web], [defaults] and [teams.<name>]"))
		}
	}
	return cfg
}

// section decodes the top-level table name into dst; it reports whether
// the table was there.
func (d *decoder) section(raw map[string]any, name, table string, dst any) bool {
	v, ok := raw[name]
	if !ok {
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		d.errorAt([]string{name}, wrongType("a table ["+name+"]", v))
		return false
	}
	d.table([]string{name}, nil, m, table, dst, name != "defaults")
	return true
}

// table decodes m, found at path+rel, into dst with the settings of table.
// perTeam says whether PerTeam keys are allowed.
func (d *decoder) table(path, rel []string, m map[string]any, table string, dst any, perTeam bool) {
	index, subtables := schemaIndex()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		r := append(slices.Clip(rel), k)
		full := append(slices.Clip(path), r...)
		if s := index[table][joinKey(r)]; s != nil {
			if s.PerTeam && !perTeam {
				d.errorAt(full, fmt.Errorf("%s is set per team: move it to [teams.<name>]", s.Key))
				continue
			}
			d.defined[joinKey(full)] = true
			if err := s.set(dst, v); err != nil {
				d.errorAt(full, err)
			}
			continue
		}
		if subtables[table][joinKey(r)] {
			if sub, ok := v.(map[string]any); ok {
				d.table(path, r, sub, table, dst, perTeam)
			} else {
				d.errorAt(full, wrongType("a table", v))
			}
			continue
		}
		d.errorAt(full, unknownKey(table, r))
	}
}

// unknownKey explains an unknown key, suggesting the closest known one.
func unknownKey(table string, rel []string) error {
	name := strings.Join(rel, ".")
	best, bestDist := "", 3
	for i := range Schema {
		if s := &Schema[i]; s.Table == table {
			dist := editDistance(name, s.Key)
			if len(name) >= 3 && strings.HasPrefix(s.Key, name) {
				dist = 1 // "idle" for "idle_exit"
			}
			if dist < bestDist {
				best, bestDist = s.Key, dist
			}
		}
	}
	where := "[" + table + "]"
	if table == TableTeam {
		where = "[defaults] or [teams.<name>]"
	}
	if best != "" {
		return fmt.Errorf("unknown key %q in %s: did you mean %q?", name, where, best)
	}
	return fmt.Errorf("unknown key %q in %s (see legion.toml(5) for the known keys)", name, where)
}

// teams decodes [teams.<name>] tables onto the defaults.
func (d *decoder) teams(cfg *Config, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorAt([]string{"teams"}, wrongType("tables [teams.<name>]", v))
		return
	}
	byShort := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		path := []string{"teams", name}
		tm, ok := m[name].(map[string]any)
		if !ok {
			d.errorAt(path, wrongType("a table [teams."+toml.Key{name}.String()+"]", m[name]))
			continue
		}
		if err := CheckTeamName(name); err != nil {
			d.errorAt(path, err)
		}
		t := cfg.Defaults
		t.Agent = t.Agent.clone()
		t.Hardening = t.Hardening.clone()
		t.Name = name
		d.table(path, nil, tm, TableTeam, &t, true)
		d.kindDefaults(&t, path, cfg.Defaults.Agent.Kind)
		if !d.isDefined("teams", name, "id") {
			d.errorAt(append(path, "id"), errors.New("missing: every team needs an id, a UUID (`legion team add` writes one)"))
		}
		if !d.isDefined("teams", name, "workspace") {
			d.errorAt(append(path, "workspace"), errors.New("missing: every team needs a workspace, the path of its git repository"))
		}
		if t.IssuePrefix == "" {
			t.IssuePrefix = defaultIssuePrefix(name)
		}
		d.crossCheck(&t, path)
		if t.ID != [16]byte{} {
			short := t.ShortID()
			if other, dup := byShort[short]; dup {
				d.errorAt(append(path, "id"), fmt.Errorf("team %q has an id starting with %s too: ids must differ in their first 8 hex characters, which name the team's units", other, short))
			}
			byShort[short] = name
		}
		cfg.Teams = append(cfg.Teams, t)
	}
}

// kindDefaults gives the team at path the default argvs of its agent kind
// where it does not set agent.new or agent.resume itself and does not
// inherit them from a [defaults] of the same kind (whose argvs are that
// kind's). defaultsKind is [defaults]' agent.kind.
func (d *decoder) kindDefaults(t *Team, path []string, defaultsKind AgentKind) {
	argvNew, argvResume, ok := KindArgv(t.Agent.Kind)
	if !ok {
		return
	}
	inherit := func(key string) bool {
		if d.isDefined(append(slices.Clip(path), "agent", key)...) {
			return true
		}
		return defaultsKind == t.Agent.Kind && d.isDefined("defaults", "agent", key)
	}
	if !inherit("new") {
		t.Agent.New = argvNew
	}
	if !inherit("resume") {
		t.Agent.Resume = argvResume
	}
}

// crossCheck validates what depends on several keys of the team table at
// path ("defaults" or "teams", name). Limits are checked only where one of
// their keys is set, so a bad [defaults] is reported once.
func (d *decoder) crossCheck(t *Team, path []string) {
	var limitKey []string
	for _, k := range []string{"start_limit_interval", "start_limit_burst", "restart_cooldown"} {
		if d.isDefined(append(slices.Clip(path), k)...) {
			limitKey = append(slices.Clip(path), k)
			break
		}
	}
	if limitKey != nil {
		floor := time.Duration(t.StartLimitBurst) * t.RestartCooldown
		if t.StartLimitInterval <= floor {
			d.errorAt(limitKey, fmt.Errorf("start_limit_interval %v must be longer than start_limit_burst × restart_cooldown (%d × %v = %v): restarts come at most once per cooldown, so systemd's start limit could never trip",
				t.StartLimitInterval, t.StartLimitBurst, t.RestartCooldown, floor))
		}
	}
	if d.isDefined(append(slices.Clip(path), "hardening", "relax")...) || d.isDefined(append(slices.Clip(path), "hardening", "add")...) {
		if _, err := hardening.Worker(t.Hardening.Relax, t.Hardening.Add); err != nil {
			key := append(slices.Clip(path), "hardening", "relax")
			if !d.isDefined(key...) {
				key = append(slices.Clip(path), "hardening", "add")
			}
			d.errorAt(key, err)
		}
	}
	if path[0] != "teams" {
		return
	}
	if impl, retro := t.Agent.ForMode("implement").Kind, t.Agent.ForMode("retro").Kind; impl != retro {
		d.errorAt(append(slices.Clip(path), "agent", "kind_by_mode"), fmt.Errorf("the retro (%s) resumes the implementer's (%s) conversation: give implement and retro the same kind", retro, impl))
	}
	if t.Tracker == TrackerLinear && t.Linear.TeamKey == "" {
		d.missing(path, "tracker", []string{"linear", "team_key"}, `missing: required when tracker = "linear" (the Linear team key, e.g. "ENG")`)
	}
	if t.Tracker == TrackerGitHub && !d.isDefined(append(slices.Clip(path), "review")...) {
		t.Review = ReviewGitHub // the pull request is the unit of review
	}
	if t.Tracker == TrackerGitHub && t.GitHub.Repo == "" {
		d.missing(path, "tracker", []string{"github", "repo"}, `missing: required when tracker = "github" (the repository as "owner/name")`)
	} else if t.Review == ReviewGitHub && t.GitHub.Repo == "" {
		d.missing(path, "review", []string{"github", "repo"}, `missing: required when review = "github" (the repository as "owner/name")`)
	}
	if t.GitHub.WebhookSecretFile != "" && t.GitHub.Repo == "" {
		d.missing(append(slices.Clip(path), "github"), "webhook_secret_file", []string{"repo"}, `missing: required with github.webhook_secret_file (the repository whose events the webhook accepts, as "owner/name")`)
	}
	if t.Engine == EngineKubernetes {
		if t.Kubernetes.Namespace == "" {
			d.missing(path, "engine", []string{"kubernetes", "namespace"}, `missing: required when engine = "kubernetes" (the team's namespace)`)
		}
		if t.Kubernetes.Image == "" {
			d.missing(path, "engine", []string{"kubernetes", "image"}, `missing: required when engine = "kubernetes" (the worker image: README, Kubernetes)`)
		}
	}
	if len(t.Kubernetes.SecretEnv) > 0 && t.Kubernetes.Secret == "" {
		d.missing(append(slices.Clip(path), "kubernetes"), "secret_env", []string{"secret"}, `missing: required with kubernetes.secret_env (the Secret whose keys it names)`)
	}
	if n := t.Notify; n.WebhookURL != "" && n.WebhookSecretEnv == "" && n.WebhookSecretFile == "" {
		d.missing(append(slices.Clip(path), "notify"), "webhook_url", []string{"webhook_secret_file"}, `missing: required with notify.webhook_url (or notify.webhook_secret_env): the secret that signs each message`)
	}
}

// missing reports the key rel of the table at path as missing, on the line
// of the key because (which requires it) when the table sets that.
func (d *decoder) missing(path []string, because string, rel []string, msg string) {
	key := append(slices.Clip(path), rel...)
	line := d.loc.line(key)
	if b := append(slices.Clip(path), because); d.isDefined(b...) {
		line = d.loc.line(b)
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Key: keyString(key), Err: errors.New(msg)})
}

// MaxTeamNameLen bounds team names in bytes so that the escaped unit name
// legion@<name>.service (each byte may become 4) stays within systemd's
// 255-character limit, with room for a ".d" drop-in directory.
const MaxTeamNameLen = 56

// CheckTeamName reports whether name can name a team: non-empty UTF-8, no
// control characters, at most MaxTeamNameLen bytes. Spaces, '/', '.' and any
// other Unicode are fine: unit names escape them.
func CheckTeamName(name string) error {
	switch {
	case name == "":
		return errors.New("invalid team name: expected a non-empty name")
	case !utf8.ValidString(name):
		return fmt.Errorf("invalid team name %q: expected UTF-8", name)
	case len(name) > MaxTeamNameLen:
		return fmt.Errorf("invalid team name %q: %d bytes, expected at most %d", name, len(name), MaxTeamNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("invalid team name %q: expected no control characters", name)
	}
	return nil
}

var issuePrefixRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9]{0,9}$`) })

func validIssuePrefix(s string) bool { return issuePrefixRE().MatchString(s) }

// defaultIssuePrefix derives an issue prefix from a team name.
func defaultIssuePrefix(name string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(name) {
		if (r >= 'A' && r <= 'Z') || (b.Len() > 0 && r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
		if b.Len() == 10 {
			break
		}
	}
	if b.Len() == 0 {
		return "ISSUE"
	}
	return b.String()
}

var repoRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$`)
})

func validRepo(s string) bool { return repoRE().MatchString(s) }

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
