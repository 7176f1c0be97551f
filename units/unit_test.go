package units_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/units"
)

func TestQuoteArg(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"/usr/bin/legion", "/usr/bin/legion"},
		{"", `""`},
		{";", `";"`},
		{`\;`, `"\\;"`},
		{"a;b", `"a;b"`},
		{"-x", "-x"},
		{"--flag=v", "--flag=v"},
		{"@argv0", "@argv0"},
		{"+plus", "+plus"},
		{"!bang", "!bang"},
		{":colon", ":colon"},
		{"$HOME", "$$HOME"},
		{"${HOME}", "$${HOME}"},
		{"100%", "100%%"},
		{"%i", "%%i"},
		{"with space", `"with space"`},
		{"tab\there", `"tab\there"`},
		{"line\nbreak", `"line\nbreak"`},
		{"cr\r", `"cr\r"`},
		{`dq"`, `"dq\""`},
		{"sq'", `"sq'"`},
		{`back\slash`, `"back\\slash"`},
		{`trailing\`, `"trailing\\"`},
		{"bell\a", `"bell\x07"`},
		{"del\x7f", `"del\x7f"`},
		{"ünï", "ünï"},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"vt\v", `"vt\x0b"`},
		{"all $ % \" ' \\ ;", `"all $$ %% \" ' \\ ;"`},
	}
	for _, tt := range tests {
		if got := units.QuoteArg(tt.in); got != tt.want {
			t.Errorf("QuoteArg(%q) = %s; want %s", tt.in, got, tt.want)
		}
	}
}

func TestFileAndProperties(t *testing.T) {
	u := units.Unit{Name: "legion-00000000-i-m.service", Options: []units.Option{
		units.String("Unit", "Description", "50% done\nExecStart=/evil \\"),
		units.String("Service", "Type", "notify"),
		units.Exec("ExecStart", []string{"/bin/x", "$HOME", "100%", "a b"}),
		units.Environment([]string{"A=$x", "B=1 2", "C=50%"}),
		units.Duration("Service", "RestartSec", "RestartUSec", 1500*time.Millisecond),
		units.Duration("Service", "WatchdogSec", "WatchdogUSec", 7*time.Microsecond),
		units.Uint32("Unit", "StartLimitBurst", 3),
		units.Uint64("Service", "TasksMax", 10),
		units.CPUQuota("Service", 150),
		units.Bool("Service", "RemainAfterExit", true),
	}}
	wantFile := units.Header + `

[Unit]
Description=50%% done\x0aExecStart=/evil \x5c
StartLimitBurst=3

[Service]
Type=notify
ExecStart=/bin/x $$HOME 100%% "a b"
Environment=A=$x "B=1 2" C=50%%
RestartSec=1500ms
WatchdogSec=7us
TasksMax=10
CPUQuota=150%
RemainAfterExit=yes
`
	if diff := cmp.Diff(wantFile, string(u.File())); diff != "" {
		t.Errorf("File() (-want +got):\n%s", diff)
	}
	props, err := u.Properties()
	if err != nil {
		t.Fatalf("Properties(): %v", err)
	}
	got := map[string]any{}
	for _, p := range props {
		got[p.Name] = p.Value.Value()
	}
	want := map[string]any{
		"Description":        "50% done\nExecStart=/evil \\",
		"Type":               "notify",
		"Environment":        []string{"A=$x", "B=1 2", "C=50%"},
		"RestartUSec":        uint64(1500000),
		"WatchdogUSec":       uint64(7),
		"StartLimitBurst":    uint32(3),
		"TasksMax":           uint64(10),
		"CPUQuotaPerSecUSec": uint64(1500000),
		"RemainAfterExit":    true,
	}
	for k, w := range want {
		if diff := cmp.Diff(w, got[k]); diff != "" {
			t.Errorf("Properties()[%s] (-want +got):\n%s", k, diff)
		}
	}
	if gotExec := fmt.Sprint(got["ExecStart"]); gotExec != "[{/bin/x [/bin/x $$HOME 100% a b] false}]" {
		t.Errorf("Properties()[ExecStart] = %s; want argv with $ doubled and %% as is", gotExec)
	}

	fileOnly := units.Unit{Name: "x@.service", Options: []units.Option{
		units.ExecWithSpecifiers("ExecStart", []string{"/b in/x"}, "%i"),
	}}
	if _, err := fileOnly.Properties(); err == nil || !strings.Contains(err.Error(), "unit x@.service: ExecStart= cannot be set on a transient unit") {
		t.Errorf("Properties() of a file-only option: error %v; want one naming the unit and key", err)
	}
	if got, want := string(fileOnly.File()), units.Header+"\n\n[Service]\nExecStart=\"/b in/x\" %i\n"; got != want {
		t.Errorf("File() = %q; want %q", got, want)
	}
}

func TestExecWithSpecifiersPanicsOnBadWord(t *testing.T) {
	for _, w := range []string{"", "%i x", `%i"`, "$X", ";"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("ExecWithSpecifiers(..., %q) did not panic", w)
				}
			}()
			units.ExecWithSpecifiers("ExecStart", []string{"/x"}, w)
		}()
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"}, {30 * time.Second, "30s"}, {10 * time.Minute, "600s"},
		{1500 * time.Millisecond, "1500ms"}, {1001 * time.Microsecond, "1001us"},
	}
	for _, tt := range tests {
		if got := units.FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// quoteArgs are words that must reach a process exactly as given, through a
// unit file and through D-Bus (all valid UTF-8: D-Bus carries nothing else).
var quoteArgs = []string{
	"zero", "", ";", `\;`, "a;b", "-x", "@a", "+p", "!b", ":c", "$HOME", "${HOME}", "$$",
	"100%", "%i", "%%", "with space", "tab\there", "line\nbreak", "cr\r", `dq"`, "sq'",
	`back\slash`, `trailing\`, "bell\a", "del\x7f", "ünï 日本", "all $ % \" ' \\ ;", " lead", "trail ",
}

// quoteEnv are Environment= assignments that must arrive unchanged.
var quoteEnv = []string{"A=$x", "B=1 2", "C=50%", `D=q"uo'te\`, "E=new\nline", "F=${HOME}"}

// TestQuotingRoundTrip runs one Unit twice in a private manager, from a
// unit file and as a transient unit, and checks that the process gets
// exactly the argv and environment the Unit was built from: the proof that
// File() and Properties() say the same thing.
func TestQuotingRoundTrip(t *testing.T) {
	_, m, ctx := setup(t)
	out := filepath.Join(t.TempDir(), "out dir%i $HOME")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	// The script is itself a nasty word: $, %, quotes and backslashes.
	script := `for a in "$0" "$@"; do printf '%s\0' "$a"; done > "$OUT.argv"; ` +
		`printf '%s\0' "$A" "$B" "$C" "$D" "$E" "$F" "$AFTER" > "$OUT.env"`
	unit := func(name string, extra ...units.Option) units.Unit {
		return units.Unit{Name: name, Options: append([]units.Option{
			units.String("Unit", "Description", "quoting 100% \\"),
			units.String("Service", "Type", "oneshot"),
			units.Exec("ExecStart", append([]string{"/bin/sh", "-c", script}, quoteArgs...)),
			units.Environment(append([]string{"OUT=" + filepath.Join(out, name)}, quoteEnv...)),
		}, extra...)}
	}
	// In the file, a value with a newline and a trailing backslash must not
	// spill into the next line: AFTER must still be set.
	fileUnit := unit("quote-file.service",
		units.FileOnly("Service", "SyslogIdentifier", "id\nExecStart=/bin/false \\", false),
		units.FileOnly("Service", "Environment", "AFTER=1", false))
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	if err := os.MkdirAll(unitDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unitDir, fileUnit.Name), fileUnit.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx, fileUnit.Name); err != nil {
		t.Fatalf("start %s:\n%s\n%v", fileUnit.Name, fileUnit.File(), err)
	}
	transient := unit("quote-transient.service", units.Environment([]string{"AFTER=1"}))
	if err := m.StartTransient(ctx, transient); err != nil {
		t.Fatalf("start transient: %v", err)
	}
	wantEnv := []string{"$x", "1 2", "50%", `q"uo'te\`, "new\nline", "${HOME}", "1"}
	for _, name := range []string{fileUnit.Name, transient.Name} {
		for suffix, want := range map[string][]string{".argv": quoteArgs, ".env": wantEnv} {
			data, err := os.ReadFile(filepath.Join(out, name+suffix))
			if err != nil {
				t.Fatalf("%s did not run as expected: %v", name, err)
			}
			got := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: %s the process got (-want +got):\n%s", name, suffix, diff)
			}
		}
	}
}

func TestExecProgram(t *testing.T) {
	for _, p := range []string{"/usr/bin/legion", "/opt/my legion/bin/legion", `/tmp/a"b\c`, "/tmp/100%/$x", "/tmp/ünï\tx", "/tmp/bad\xff"} {
		line := units.QuoteArg(p) + " helper --flag"
		got, err := units.ExecProgram(line)
		if err != nil || got != p {
			t.Errorf("ExecProgram(%q) = %q, %v; want %q", line, got, err, p)
		}
		if got, err := units.ExecProgram("-" + line); err != nil || got != p {
			t.Errorf("ExecProgram(%q) = %q, %v; want %q", "-"+line, got, err, p)
		}
	}
	for _, bad := range []string{"", "   ", `"/unterminated`, `"\q"`} {
		if got, err := units.ExecProgram(bad); err == nil {
			t.Errorf("ExecProgram(%q) = %q; want an error", bad, got)
		}
	}
}

// FuzzExecProgram: ExecProgram reads back any absolute program path that
// QuoteArg wrote, and never panics on other input.
func FuzzExecProgram(f *testing.F) {
	f.Add("/usr/bin/legion")
	f.Add("/a b/\"c\"\\%$")
	f.Fuzz(func(t *testing.T, s string) {
		units.ExecProgram(s) // any input: an error at worst
		p := "/" + s
		line := units.QuoteArg(p) + " helper"
		if got, err := units.ExecProgram(line); err != nil || got != p {
			t.Fatalf("ExecProgram(%q) = %q, %v; want %q", line, got, err, p)
		}
	})
}
