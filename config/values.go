package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/units/hardening"
)

// Duration is a time.Duration written as a string: Go's syntax ("30s",
// "10m", "1h30m") or systemd's ("30 s", "2min 30s", "1d"). It is the
// helper API's type (api.Duration), so legion.toml and the API decode
// durations alike.
type Duration = api.Duration

// ParseDuration parses a non-negative duration in Go's syntax ("1h30m") or
// systemd's ("1h 30min", "2 days"); see api.ParseDuration.
func ParseDuration(s string) (time.Duration, error) { return api.ParseDuration(s) }

// sizeUnits are systemd's base-1024 size suffixes (systemd.resource-control(5)).
var sizeUnits = map[string]uint64{
	"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60,
}

// ParseSize parses a byte count as systemd does: a number, optionally with a
// fraction, and an optional base-1024 suffix K, M, G, T, P or E ("4G",
// "1.5G", "512M", "1048576").
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	mult, ok := sizeUnits[strings.TrimSpace(t[i:])]
	if !ok || i == 0 {
		return 0, fmt.Errorf(`invalid size %q: expected bytes or a number with K, M, G or T, e.g. "512M" or "4G"`, s)
	}
	whole, frac, _ := strings.Cut(t[:i], ".")
	if whole == "" || strings.Contains(frac, ".") {
		return 0, fmt.Errorf(`invalid size %q: expected bytes or a number with K, M, G or T, e.g. "512M" or "4G"`, s)
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || (w != 0 && w > math.MaxUint64/mult) {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	n := w * mult
	if frac != "" {
		f, err := strconv.ParseFloat("0."+frac, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid size %q", s)
		}
		add := uint64(f * float64(mult))
		if n > math.MaxUint64-add {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		n += add
	}
	return n, nil
}

// ParsePercent parses a whole percentage such as "200%" (systemd's
// CPUQuota=, where 100% is one CPU).
func ParsePercent(s string) (int, error) {
	t := strings.TrimSpace(s)
	num, ok := strings.CutSuffix(t, "%")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 || n > 1_000_000 {
		return 0, fmt.Errorf(`invalid percentage %q: expected a whole number with %%, e.g. "200%%" (100%% is one CPU)`, s)
	}
	return n, nil
}

// Decoding of TOML values (as BurntSushi/toml gives them in a map) for the
// setters of Schema.

func stringValue(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", wrongType("a string", v)
	}
	return s, nil
}

func nonEmptyString(v any) (string, error) {
	s, err := stringValue(v)
	if err == nil && s == "" {
		err = errors.New("expected a non-empty string")
	}
	return s, err
}

// enumValue requires v to be one of allowed.
func enumValue(v any, what string, allowed ...string) (string, error) {
	s, err := stringValue(v)
	if err != nil {
		return "", err
	}
	if !slices.Contains(allowed, s) {
		quoted := make([]string, len(allowed))
		for i, a := range allowed {
			quoted[i] = strconv.Quote(a)
		}
		list := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
		return "", fmt.Errorf("unknown %s %q: expected %s", what, s, list)
	}
	return s, nil
}

func intValue(v any, lo, hi int64) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, wrongType("an integer", v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is out of range: expected an integer from %d to %d", n, lo, hi)
	}
	return n, nil
}

// durationValue parses a duration string of at least lo.
func durationValue(v any, lo time.Duration) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, wrongType(`a duration string such as "30s" or "10m"`, v)
	}
	var d Duration
	if err := d.UnmarshalText([]byte(s)); err != nil {
		return 0, err
	}
	if time.Duration(d) < lo {
		return 0, fmt.Errorf("duration %q is too short: expected at least %v", s, lo)
	}
	return time.Duration(d), nil
}

// sizeValue takes bytes as an integer or a size string.
func sizeValue(v any) (uint64, error) {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return 0, fmt.Errorf("size %d is negative: expected bytes or a size such as \"4G\"", v)
		}
		return uint64(v), nil
	case string:
		return ParseSize(v)
	}
	return 0, wrongType(`a size such as "512M" or "4G"`, v)
}

// argvValue takes a non-empty array of strings whose placeholders are known.
func argvValue(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, wrongType(`an array of strings such as ["claude", "--resume", "{session_id}"]`, v)
	}
	if len(arr) == 0 {
		return nil, errors.New("empty argv: expected the program and its arguments")
	}
	argv := make([]string, len(arr))
	for i, a := range arr {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("argument %d: %w", i, wrongType("a string", a))
		}
		argv[i] = s
	}
	if argv[0] == "" {
		return nil, errors.New("empty program name: expected the program as the first string")
	}
	if err := CheckTemplate(argv); err != nil {
		return nil, err
	}
	return argv, nil
}

// pathValue takes an absolute path or one starting with ~/.
func pathValue(v any) (string, error) {
	s, err := nonEmptyString(v)
	if err != nil {
		return "", err
	}
	return expandHome(s)
}

// checkDir requires p to be an existing directory.
func checkDir(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", p)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", p)
	}
	return nil
}

// policyValue takes a permission policy.
func policyValue(v any) (PermissionPolicy, error) {
	s, err := stringValue(v)
	if err != nil {
		return "", err
	}
	switch p := PermissionPolicy(s); p {
	case PermissionsAllowlist, PermissionsAsk, PermissionsBypass, PermissionsSandbox:
		return p, nil
	}
	return "", fmt.Errorf(`unknown permission policy %q: expected "sandbox", "allowlist", "ask" or "bypass"`, s)
}

// policyByModeValue takes a table of worker mode = permission policy.
func policyByModeValue(v any) (map[string]PermissionPolicy, error) {
	return byModeValue(v, `a table such as { review = "ask" }`, policyValue)
}

// kindByModeValue is agent.kind_by_mode: modes to kinds with hooks
// (claude, codex, opencode; a custom agent has no default argv to switch
// to).
func kindByModeValue(v any) (map[string]AgentKind, error) {
	return byModeValue(v, `a table such as { plan = "codex" }`, func(v any) (AgentKind, error) {
		k, err := enumValue(v, "agent kind", kindNames(false)...)
		return AgentKind(k), err
	})
}

// byModeValue takes a table of worker mode = value, each value taken by
// value; example shows the table's form in the wrong-type error. Every
// unknown mode and bad value is an error of its own.
func byModeValue[T any](v any, example string, value func(any) (T, error)) (map[string]T, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, wrongType(example, v)
	}
	out := make(map[string]T, len(m))
	var errs []error
	for _, mode := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(workerModes, mode) {
			errs = append(errs, fmt.Errorf("unknown mode %q: expected %s", mode, strings.Join(workerModes, ", ")))
			continue
		}
		x, err := value(m[mode])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", mode, err))
			continue
		}
		out[mode] = x
	}
	return out, errors.Join(errs...)
}

// permissionRuleRE is a Claude Code permission rule: a tool name (MCP
// tools have "__" in theirs), optionally a specifier in parentheses.
var permissionRuleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*(\(.+\))?$`) })

// rulesValue takes an array of permission rules.
func rulesValue(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, wrongType(`an array of permission rules such as ["Bash(make test)"]`, v)
	}
	var rules []string
	for i, a := range arr {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("rule %d: %w", i, wrongType("a string", a))
		}
		if !permissionRuleRE().MatchString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf(`rule %d: invalid permission rule %q: expected a tool name with an optional specifier in parentheses, e.g. "Bash(make test)" or "Bash(go test:*)"`, i, s)
		}
		rules = append(rules, s)
	}
	return rules, nil
}

// directivesValue takes an array of hardening directive names, each a key
// of set (list names the key in errors).
func directivesValue(v any, list string, set []hardening.Directive) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, wrongType(`an array of directive names such as ["PrivateTmp"]`, v)
	}
	names := make([]string, len(arr))
	for i, a := range arr {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("directive %d: %w", i, wrongType("a string", a))
		}
		names[i] = s
	}
	if err := hardening.CheckNames(list, names, set); err != nil {
		return nil, err
	}
	return names, nil
}

// directiveList documents a set of directives: "Key=Value: what it takes
// away (needs PrivateUsers)", joined by "; ", ending in a period.
func directiveList(set []hardening.Directive) string {
	items := make([]string, len(set))
	for i, d := range set {
		items[i] = d.String() + ": " + d.Doc
		if d.NeedsPrivateUsers {
			items[i] += " (needs PrivateUsers)"
		}
	}
	return strings.Join(items, "; ") + "."
}

// envNameRE is an environment variable's name as a shell takes it.
var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// envValue is agent.env: a table of NAME = "value". LEGION_* names are
// Legion's own (each worker's LEGION_TEAM, LEGION_SESSION, ...) and are
// refused, as are values with a NUL byte, which no environment can hold.
func envValue(v any) (map[string]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, wrongType(`a table such as { GOFLAGS = "-mod=mod" }`, v)
	}
	out := make(map[string]string, len(m))
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[name].(string)
		switch {
		case !envNameRE().MatchString(name):
			errs = append(errs, fmt.Errorf("%q: not a variable name (letters, digits and _, not first a digit)", name))
		case strings.HasPrefix(name, "LEGION_"):
			errs = append(errs, fmt.Errorf("%s: LEGION_* variables are Legion's own", name))
		case !ok:
			errs = append(errs, fmt.Errorf("%s: %w", name, wrongType("a string", m[name])))
		case strings.ContainsRune(s, 0):
			errs = append(errs, fmt.Errorf("%s: a NUL byte in the value", name))
		default:
			out[name] = s
		}
	}
	return out, errors.Join(errs...)
}

// secretEnvValue is kubernetes.secret_env: variables (as agent.env's
// names) by the key of the team's Secret that holds each.
func secretEnvValue(v any) (map[string]string, error) {
	m, err := envValue(v)
	if err != nil {
		return m, err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if k := m[name]; !secretKeyRE().MatchString(k) || len(k) > 253 || k == "." || k == ".." {
			errs = append(errs, fmt.Errorf("%s: %q is not a key of a Secret (letters, digits, '-', '_' and '.', at most 253)", name, k))
		}
	}
	return m, errors.Join(errs...)
}

var secretKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[-._a-zA-Z0-9]+$`) })

// envByKindValue is agent.env_by_kind: a table of kind = { NAME = "value" }.
func envByKindValue(v any) (map[AgentKind]map[string]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, wrongType(`a table such as { gemini = { GEMINI_MODEL = "gemini-2.5-pro" } }`, v)
	}
	out := make(map[AgentKind]map[string]string, len(m))
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kind, err := agentKindValue(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		env, err := envValue(m[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
			continue
		}
		out[AgentKind(kind)] = env
	}
	return out, errors.Join(errs...)
}

// agentKindValue is an agent kind, any of them (agent.kind, the keys of
// agent.env_by_kind); agent.kind_by_mode takes only kinds with hooks.
func agentKindValue(v any) (string, error) {
	return enumValue(v, "agent kind", kindNames(true)...)
}

// httpURLValue requires v to be an absolute http or https URL with a host.
func httpURLValue(v any) (string, error) {
	s, err := nonEmptyString(v)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid URL %q: expected an http:// or https:// address with a host", s)
	}
	return s, nil
}

// quantityValue is a Kubernetes quantity ("500m", "2Gi"), as
// k8s.io/apimachinery's resource.ParseQuantity takes it (without a sign:
// sizes and shares are positive); TestQuantityLikeKubernetes holds the two
// together. Not that package itself: it would grow every legion start
// (see package activation/kube/wire).
func quantityValue(v any) (string, error) {
	s, err := nonEmptyString(v)
	if err != nil {
		return "", err
	}
	if !quantityRE.MatchString(s) {
		return "", fmt.Errorf("invalid quantity %q: expected a Kubernetes quantity such as \"500m\", \"2\" or \"10Gi\"", s)
	}
	return s, nil
}

var (
	quantityRE = regexp.MustCompile(`^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]{1,2})?$`)
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// dnsLabel reports whether s is an RFC 1123 label, as namespaces are.
func dnsLabel(s string) bool { return len(s) <= 63 && dnsLabelRE.MatchString(s) }
