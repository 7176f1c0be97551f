package config

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// FuzzLoad feeds arbitrary file contents to the loader: it must not panic,
// every error must be a *Error naming the file, and whenever toml parses the
// text, the locator's key list must be toml's (or lines would be wrong).
func FuzzLoad(f *testing.F) {
	// The shipped file's settings, uncommented, in small pieces: the fuzzer
	// minimizes every interesting input, which crawls on big ones.
	if data, err := os.ReadFile(shippedPath); err == nil {
		var table string
		var lines []string
		flush := func() {
			if len(lines) > 0 {
				f.Add(table + "\n" + strings.Join(lines, "\n") + "\n")
			}
			lines = nil
		}
		for _, l := range strings.Split(commentedSetting.ReplaceAllString(string(data), "$1"), "\n") {
			switch {
			case l == "" || strings.HasPrefix(l, "#"):
			case strings.HasPrefix(l, "["):
				flush()
				table = l
			default:
				if lines = append(lines, l); len(lines) == 4 {
					flush()
				}
			}
		}
		flush()
	}
	f.Add("[teams.\"x.y\"]\narr = [\n  1, # c\n  { k = \"v\", n.m = 2 },\n]\nd = 1979-05-27 07:32:00Z\n")
	f.Add("s = \"\"\"a\"\"\"\"\"\nl = '''\n'' x\n'''\n\"\\u00e9\" = 1\n[[l]]\ni = { x = {\n y = 1, } }\n")
	f.Add(team + "stale_after = \"10 minutes\"\nwip_limit = 0\n")
	f.Add(team + "budget.issue_usd = 1e308\nbudget.prices = { \"\" = { input = -1 }, m = { output = nan } }\n")
	f.Add("[teams.\"a b\"]\nid = \"" + demoID + "\"\nworkspace = \"/\"\nagent = { new = [\"x\", \"{issue}\"] }\n")
	f.Add("[defaults]\nlinear.team_key = 'ENG'\nstart_limit_interval = \"1s\"\n[[teams]]\n")
	f.Add("a = [{b = {c = [1, {d = 2}]}}]\n\"\\u00e9\" = '''\n'''\n")
	f.Fuzz(func(t *testing.T, text string) {
		const file = "/fuzz/legion.toml"
		cfg, err := Parse(file, []byte(text))
		if err == nil {
			if cfg == nil {
				t.Fatal("Parse returned neither config nor error")
			}
		} else {
			var es []error
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				es = j.Unwrap()
			} else {
				es = []error{err}
			}
			for _, e := range es {
				var ce *Error
				if !errors.As(e, &ce) || ce.File != file {
					t.Fatalf("error %q (%T) is not a *Error naming the file", e, e)
				}
			}
		}

		keys := scanKeys(text) // must end on any input
		var raw map[string]any
		md, perr := toml.Decode(text, &raw)
		if perr != nil {
			return
		}
		want := md.Keys()
		if len(keys) != len(want) {
			t.Fatalf("scanKeys found %d keys; toml %d:\n%v\n%v", len(keys), len(want), keys, want)
		}
		for i := range keys {
			if !slices.Equal(keys[i].key, want[i]) {
				t.Fatalf("key %d: scanKeys %q; toml %q", i, keys[i].key, want[i])
			}
		}
	})
}

// FuzzQuote checks that AddTeam's quoting round-trips any valid team name.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"demo", "my team/ü", "a\"b\\c", "\x7f", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		text := "[t." + quoteKey(s) + "]\nv = " + quoteString(s) + "\n"
		var v map[string]map[string]map[string]string
		if _, err := toml.Decode(text, &v); err != nil {
			t.Fatalf("quoting %q gives invalid TOML %q: %v", s, text, err)
		}
		if got := v["t"][s]["v"]; got != s {
			t.Fatalf("round trip of %q = %q", s, got)
		}
	})
}
