package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the repository's legion.toml from the schema")

// shippedPath is the documented config at the repository root.
const shippedPath = "../legion.toml"

func TestShippedFile(t *testing.T) {
	want := ExampleFile()
	if *update {
		if err := os.WriteFile(shippedPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(shippedPath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is out of date with the schema; run go test ./config -run TestShippedFile -update (-want +got):\n%s", shippedPath, diff)
	}
}

func TestShippedFileLoads(t *testing.T) {
	cfg, err := Load(shippedPath)
	if err != nil {
		t.Fatalf("Load(%s) = %v", shippedPath, err)
	}
	want := &Config{Path: shippedPath, Helper: defaultHelper(), Worker: defaultWorker(), Web: defaultWeb(), Defaults: defaultTeam()}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("Load(%s) is not all defaults (-want +got):\n%s", shippedPath, diff)
	}
}

// commentedSetting matches a commented-out setting or table header: "#"
// directly followed by the key, where prose has "# ".
var commentedSetting = regexp.MustCompile(`(?m)^#([^ #\n])`)

// TestShippedFileDocumentsEveryKey uncomments every setting of the shipped
// file, loads it, and checks that each key of the schema was there, with its
// default.
func TestShippedFileDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(shippedPath)
	if err != nil {
		t.Fatal(err)
	}
	text := commentedSetting.ReplaceAllString(string(data), "$1")
	ws := t.TempDir()
	text = strings.ReplaceAll(text, `workspace = "~/src/demo"`, "workspace = "+quoteString(ws))
	path := filepath.Join(t.TempDir(), "legion.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load(uncommented %s) = %v", shippedPath, err)
	}
	if _, ok := cfg.Team("demo"); !ok {
		t.Errorf("the uncommented example defines no team demo")
	}

	var raw map[string]any
	md, err := toml.Decode(text, &raw)
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, k := range md.Keys() {
		present[k.String()] = true
	}
	for _, s := range Schema {
		table := s.Table
		switch {
		case table == TableTeam && s.PerTeam:
			table = "teams.demo"
		case table == TableTeam:
			table = "defaults"
		}
		key := table + "." + s.Key
		if !present[key] {
			t.Errorf("%s does not document %s (%s)", shippedPath, key, s.Key)
		}
		if s.Doc == "" || s.Type == "" {
			t.Errorf("Schema entry %s.%s has no Doc or Type", s.Table, s.Key)
		}
		if s.Default != "" && !bytes.Contains(data, []byte("\n#"+s.Key+" = "+s.Default+"\n")) {
			t.Errorf("%s does not show %s with its default %s", shippedPath, key, s.Default)
		}
		if s.Default == "" && s.Example == "" {
			t.Errorf("Schema entry %s.%s has neither Default nor Example", s.Table, s.Key)
		}
	}
}

// TestSchemaDefaultsAreBuiltIn sets each documented default on the built-in
// defaults and checks nothing changes: the docs cannot drift.
func TestSchemaDefaultsAreBuiltIn(t *testing.T) {
	for _, s := range Schema {
		if s.Default == "" {
			continue
		}
		var v struct{ V any }
		if _, err := toml.Decode("V = "+s.Default, &v); err != nil {
			t.Errorf("%s.%s: default %s is not TOML: %v", s.Table, s.Key, s.Default, err)
			continue
		}
		var got, want any
		switch s.Table {
		case TableHelper:
			d := defaultHelper()
			if err := s.set(&d, v.V); err != nil {
				t.Errorf("%s.%s: default %s: %v", s.Table, s.Key, s.Default, err)
			}
			got, want = d, defaultHelper()
		case TableWorker:
			d := defaultWorker()
			if err := s.set(&d, v.V); err != nil {
				t.Errorf("%s.%s: default %s: %v", s.Table, s.Key, s.Default, err)
			}
			got, want = d, defaultWorker()
		case TableWeb:
			d := defaultWeb()
			if err := s.set(&d, v.V); err != nil {
				t.Errorf("%s.%s: default %s: %v", s.Table, s.Key, s.Default, err)
			}
			got, want = d, defaultWeb()
		case TableTeam:
			d := defaultTeam()
			if err := s.set(&d, v.V); err != nil {
				t.Errorf("%s.%s: default %s: %v", s.Table, s.Key, s.Default, err)
			}
			got, want = d, defaultTeam()
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s.%s: documented default %s differs from the built-in one (-built-in +documented):\n%s", s.Table, s.Key, s.Default, diff)
		}
	}
}
