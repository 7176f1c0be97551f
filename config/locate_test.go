package config

import (
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
)

// locateDoc exercises every construct the scanner must step over.
const locateDoc = `# comment with "quotes" and [brackets]
top = 1 # trailing
"quoted key" = 'literal # not a comment'
a.b . c = """
multi
line = [not a key]
"""
dt = 1979-05-27 07:32:00Z

[ t . "x.y" ]   # header
arr = [
  1, # comment
  { k = "v", n.m = 2 },
  [ { deep = true } ],
]
esc = "a\"b\\"
lit = '''
'' still inside
'''
tricky = """a"""""
after = 2

[[list]]
item = { x = 1 }

[[list]]
item = { x = 2 }

[teams."my team/ü"]
id = "x"
'raw.key' = 3
"\u00e9t\u00e9" = 4
inline = {
  nl = 1,
  # comment in an inline table (TOML 1.1)
  more = { z = 0 },
}
`

func TestScanKeysMatchesToml(t *testing.T) {
	var raw map[string]any
	md, err := toml.Decode(locateDoc, &raw)
	if err != nil {
		t.Fatalf("toml.Decode: %v", err)
	}
	var got, want []string
	for _, k := range scanKeys(locateDoc) {
		got = append(got, toml.Key(k.key).String())
	}
	for _, k := range md.Keys() {
		want = append(want, k.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scanKeys keys differ from toml's (-want +got):\n%s", diff)
	}
}

func TestScanKeysEdgeCases(t *testing.T) {
	docs := []string{
		"",
		"\ufeffa = 1\n",
		"a = 1\r\nb = 2\r\n[t]\r\nc = 3\r\n",
		"1.2 = 3\n'a.b' = 4\n\"\" = 5\n",
		"a = [ \"]#\", '[', \"\\\"\" ] # \"\nb = 1\n",
		`a = """\\"""` + "\n" + `b = """ \" """` + "\n" + `c = """x"""""` + "\n" + `d = 1` + "\n",
		"a = \"\"\"x\\\n   y\"\"\"\nb = 1\n",
		"x = [[{a.b = 1}], {c = [{d = 1}]}]\n",
		"[a]\nb.c = 1\n[a.b.d]\ne = 1\n[[f]]\n[[f]]\ng = 1\n[f.h]\ni = 1\n",
		"t = {}\nu = []\nv = [[]]\nw = { a = {} }\n",
		"n = -inf\nm = +nan\nh = 0xdead\no = 0o7\nd = 07:32:00\nq = 1e-3\n",
	}
	for _, doc := range docs {
		var raw map[string]any
		md, err := toml.Decode(doc, &raw)
		if err != nil {
			t.Errorf("toml rejects %q: %v", doc, err)
			continue
		}
		var got, want []string
		for _, k := range scanKeys(doc) {
			got = append(got, toml.Key(k.key).String())
		}
		for _, k := range md.Keys() {
			want = append(want, k.String())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("scanKeys(%q) keys differ from toml's (-want +got):\n%s", doc, diff)
		}
	}
}

func TestLocatorLines(t *testing.T) {
	var raw map[string]any
	md, err := toml.Decode(locateDoc, &raw)
	if err != nil {
		t.Fatalf("toml.Decode: %v", err)
	}
	loc := newLocator(locateDoc, md.Keys())
	tests := []struct {
		key  []string
		want int
	}{
		{[]string{"top"}, 2},
		{[]string{"quoted key"}, 3},
		{[]string{"a", "b", "c"}, 4},
		{[]string{"a"}, 4}, // implied by a dotted key: its first sub-key
		{[]string{"dt"}, 8},
		{[]string{"t", "x.y"}, 10},
		{[]string{"t", "x.y", "arr"}, 11},
		{[]string{"t", "x.y", "arr", "n", "m"}, 13},
		{[]string{"t", "x.y", "arr", "deep"}, 14},
		{[]string{"t", "x.y", "esc"}, 16},
		{[]string{"t", "x.y", "tricky"}, 20},
		{[]string{"t", "x.y", "after"}, 21},
		{[]string{"list", "item", "x"}, 24},
		{[]string{"teams", "my team/ü"}, 29},
		{[]string{"teams", "my team/ü", "raw.key"}, 31},
		{[]string{"teams", "my team/ü", "été"}, 32},
		{[]string{"teams", "my team/ü", "inline", "more", "z"}, 36},
		{[]string{"teams", "my team/ü", "missing"}, 29}, // nearest parent
		{[]string{"teams"}, 29},                         // implied by a header
		{[]string{"nowhere"}, 0},
	}
	for _, tt := range tests {
		if got := loc.line(tt.key); got != tt.want {
			t.Errorf("line(%v) = %d; want %d", tt.key, got, tt.want)
		}
	}
}

func TestLocatorMismatchGivesNoLines(t *testing.T) {
	loc := newLocator("a = 1\n", []toml.Key{{"b"}})
	if got := loc.line([]string{"a"}); got != 0 {
		t.Errorf("line(a) with a mismatched key list = %d; want 0", got)
	}
}
