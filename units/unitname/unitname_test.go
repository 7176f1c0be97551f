package unitname_test

import (
	"errors"
	"flag"
	"os/exec"
	"strings"
	"testing"

	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// nastyNames are team, issue and mode names that have broken unit-name
// code elsewhere.
var nastyNames = []string{
	"plain",
	"with space",
	"a/b",
	"/leading/slash/",
	"a//b",
	"a.b",
	".hidden",
	"..",
	"-dash",
	"a-b",
	"a--b",
	"ünïcödé 日本",
	`back\slash`,
	`\x41`,
	"x:y_z",
	"tab\tnl\nend",
	"percent%i",
	"dollar$HOME",
	"at@sign",
	"quote\"'",
	"~tilde",
	"\x7f\x01",
	"\xff\xfe not utf8",
	strings.Repeat("long", 80),
	strings.Repeat("é", 60),
}

// systemdEscape runs the real systemd-escape with args and returns its
// output without the trailing newline, or an error when it fails.
func systemdEscape(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("systemd-escape", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", errors.New(strings.TrimSpace(string(ee.Stderr)))
		}
		t.Fatalf("run systemd-escape: %v", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

func requireSystemdEscape(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("systemd-escape")
	sdtest.Require(t, "systemd-escape (Debian package systemd) on $PATH", err == nil)
}

func TestEscapeMatchesSystemdEscape(t *testing.T) {
	requireSystemdEscape(t)
	for _, s := range append(nastyNames, "") {
		t.Run(s, func(t *testing.T) {
			want, err := systemdEscape(t, "--", s)
			if err != nil {
				t.Fatalf("systemd-escape %q: %v", s, err)
			}
			got := unitname.Escape(s)
			if got != want {
				t.Errorf("Escape(%q) = %q; want %q (systemd-escape)", s, got, want)
			}
			back, err := unitname.Unescape(got)
			if err != nil || back != s {
				t.Errorf("Unescape(%q) = %q, %v; want %q, nil", got, back, err, s)
			}
			if got == "" {
				return
			}
			sdBack, err := systemdEscape(t, "--unescape", "--", got)
			if err != nil || sdBack != s {
				t.Errorf("systemd-escape --unescape %q = %q, %v; want %q", got, sdBack, err, s)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	requireSystemdEscape(t)
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "a-b", want: "a/b"},
		{in: `a\x2Fb`, want: "a/b"},
		{in: `a\x2fb`, want: "a/b"},
		{in: `\xc3\xa9`, want: "é"},
		{in: `\xff`, want: "\xff"},
		{in: "a@b.c", want: "a@b.c"},
		{in: "", want: ""},
		{in: `a\x`, wantErr: true},
		{in: `a\x2`, wantErr: true},
		{in: `a\xzz`, wantErr: true},
		{in: `a\nb`, wantErr: true},
		{in: `a\\b`, wantErr: true},
		{in: `\`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := unitname.Unescape(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Unescape(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, unitname.ErrBadEscape) {
				t.Errorf("Unescape(%q) error %v; want it to wrap ErrBadEscape", tt.in, err)
			}
			if tt.in == "" {
				return
			}
			sd, sdErr := systemdEscape(t, "--unescape", "--", tt.in)
			if (sdErr != nil) != tt.wantErr || sd != tt.want {
				t.Errorf("systemd-escape --unescape %q = %q, %v; the table disagrees with systemd", tt.in, sd, sdErr)
			}
		})
	}
}

func TestControllerUnitMatchesSystemdEscapeTemplate(t *testing.T) {
	requireSystemdEscape(t)
	for _, team := range append(nastyNames, "", strings.Repeat("x", 255-len("legion@.service")), strings.Repeat("x", 256-len("legion@.service"))) {
		t.Run(team, func(t *testing.T) {
			want, sdErr := systemdEscape(t, "--template=legion@.service", "--", team)
			got, err := unitname.ControllerUnit(team)
			if (err != nil) != (sdErr != nil) || got != want {
				t.Fatalf("ControllerUnit(%q) = %q, %v; want %q, %v (systemd-escape --template)", team, got, err, want, sdErr)
			}
			if err != nil {
				return
			}
			if !unitname.ValidName(got, unitname.NameInstance) {
				t.Errorf("ValidName(%q, NameInstance) = false; want true", got)
			}
			back, err := unitname.ParseControllerUnit(got)
			if err != nil || back != team {
				t.Errorf("ParseControllerUnit(%q) = %q, %v; want %q, nil", got, back, err, team)
			}
			dropIn, err := unitname.DropInPath(team)
			if want := got + ".d/50-legion.conf"; err != nil || dropIn != want {
				t.Errorf("DropInPath(%q) = %q, %v; want %q, nil", team, dropIn, err, want)
			}
		})
	}
}

func TestControllerUnitErrors(t *testing.T) {
	for _, team := range []string{"", "nul\x00byte", strings.Repeat("y", 300)} {
		if got, err := unitname.ControllerUnit(team); err == nil {
			t.Errorf("ControllerUnit(%q) = %q, nil; want an error", team, got)
		}
	}
	for _, name := range []string{"legion@.service", "legion.service", "legion@a.socket", "other@a.service", `legion@a\q.service`, "legion@a b.service", `legion@\x00.service`} {
		if got, err := unitname.ParseControllerUnit(name); err == nil {
			t.Errorf("ParseControllerUnit(%q) = %q, nil; want an error", name, got)
		}
	}
}

func TestWorkerUnit(t *testing.T) {
	const short = "0123abcd"
	for _, issue := range nastyNames {
		for _, mode := range []string{"implement", "a/b", "-", "plan review"} {
			name, err := unitname.WorkerUnit(short, issue, mode)
			if err != nil {
				if len(unitname.Escape(issue)) < 200 {
					t.Errorf("WorkerUnit(%q, %q, %q) error %v; want a name", short, issue, mode, err)
				}
				continue
			}
			if !unitname.ValidName(name, unitname.NamePlain) {
				t.Errorf("WorkerUnit(%q, %q, %q) = %q, not a valid unit name", short, issue, mode, name)
			}
			gs, gi, gm, err := unitname.ParseWorkerUnit(name)
			if err != nil || gs != short || gi != issue || gm != mode {
				t.Errorf("ParseWorkerUnit(%q) = %q, %q, %q, %v; want %q, %q, %q, nil", name, gs, gi, gm, err, short, issue, mode)
			}
		}
	}
	if got, want := mustWorker(t, short, "LEG-12", "implement"), `legion-0123abcd-LEG\x2d12-implement.service`; got != want {
		t.Errorf("WorkerUnit(LEG-12) = %q; want %q", got, want)
	}
	if got, want := mustWorker(t, short, "a/b", "x"), `legion-0123abcd-a\x2fb-x.service`; got != want {
		t.Errorf("WorkerUnit(a/b) = %q; want %q", got, want)
	}
}

func mustWorker(t *testing.T, short, issue, mode string) string {
	t.Helper()
	name, err := unitname.WorkerUnit(short, issue, mode)
	if err != nil {
		t.Fatalf("WorkerUnit(%q, %q, %q): %v", short, issue, mode, err)
	}
	return name
}

func TestWorkerUnitErrors(t *testing.T) {
	bad := [][3]string{
		{"0123ABCD", "i", "m"},
		{"0123abc", "i", "m"},
		{"0123abcdx", "i", "m"},
		{"0123abcd", "", "m"},
		{"0123abcd", "i", ""},
		{"0123abcd", "i\x00", "m"},
		{"0123abcd", strings.Repeat("i", 250), "m"},
	}
	for _, b := range bad {
		if got, err := unitname.WorkerUnit(b[0], b[1], b[2]); err == nil {
			t.Errorf("WorkerUnit(%q, %q, %q) = %q, nil; want an error", b[0], b[1], b[2], got)
		}
	}
	for _, name := range []string{
		"legion-0123abcd-i.service",
		"legion-0123abcd-i-m-x.service",
		"legion-0123abcd--m.service",
		"legion-0123abcd-i-.service",
		"legion-0123ABCD-i-m.service",
		"legion-0123abcd-i-m.slice",
		"legion@0123abcd-i-m.service",
		`legion-0123abcd-i\q-m.service`,
		"legion-0123abcd-i j-m.service",
		"legion-0123abcd-i-m.service.d",
		`legion-0123abcd-i\x00-m.service`,
	} {
		if s, i, m, err := unitname.ParseWorkerUnit(name); err == nil {
			t.Errorf("ParseWorkerUnit(%q) = %q, %q, %q, nil; want an error", name, s, i, m)
		}
	}
}

func TestTeamSlice(t *testing.T) {
	got, err := unitname.TeamSlice("deadbeef")
	if want := "legion-deadbeef.slice"; err != nil || got != want {
		t.Errorf("TeamSlice(deadbeef) = %q, %v; want %q, nil", got, err, want)
	}
	if got, err := unitname.TeamSlice("DEADBEEF"); err == nil {
		t.Errorf("TeamSlice(DEADBEEF) = %q, nil; want an error", got)
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name  string
		kinds unitname.NameKind
		want  bool
	}{
		{"legion.socket", unitname.NamePlain, true},
		{"legion@.service", unitname.NameTemplate, true},
		{"legion@.service", unitname.NamePlain | unitname.NameInstance, false},
		{"legion@x.service", unitname.NameInstance, true},
		{"legion@x@y.service", unitname.NameInstance, true},
		{"@x.service", unitname.NameAny, false},
		{"legion.bogus", unitname.NameAny, false},
		{".service", unitname.NameAny, false},
		{"legion", unitname.NameAny, false},
		{"a b.service", unitname.NameAny, false},
		{`a\x20b.service`, unitname.NamePlain, true},
		{strings.Repeat("a", 247) + ".service", unitname.NamePlain, true},
		{strings.Repeat("a", 248) + ".service", unitname.NamePlain, false},
	}
	for _, tt := range tests {
		if got := unitname.ValidName(tt.name, tt.kinds); got != tt.want {
			t.Errorf("ValidName(%q, %v) = %v; want %v", tt.name, tt.kinds, got, tt.want)
		}
	}
}

// fuzzing reports whether the test binary is generating inputs (-fuzz) rather
// than running the seed corpus; systemd-escape is compared only for seeds.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	w := flag.Lookup("test.fuzzworker")
	return (f != nil && f.Value.String() != "") || (w != nil && w.Value.String() == "true")
}

func FuzzEscape(f *testing.F) {
	for _, s := range nastyNames {
		f.Add(s)
	}
	_, lookErr := exec.LookPath("systemd-escape")
	compare := lookErr == nil && !fuzzing()
	f.Fuzz(func(t *testing.T, s string) {
		e := unitname.Escape(s)
		back, err := unitname.Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v; want %q, nil", s, back, err, s)
		}
		name, err := unitname.ControllerUnit(s)
		switch {
		case err == nil && !unitname.ValidName(name, unitname.NameInstance):
			t.Fatalf("ControllerUnit(%q) = %q, not a valid instance name", s, name)
		case err != nil && s != "" && !strings.Contains(s, "\x00") && len(e) <= unitname.UnitNameMax-len("legion@.service"):
			t.Fatalf("ControllerUnit(%q): %v; want a name", s, err)
		}
		if err == nil {
			if team, err := unitname.ParseControllerUnit(name); err != nil || team != s {
				t.Fatalf("ParseControllerUnit(%q) = %q, %v; want %q", name, team, err, s)
			}
		}
		if w, err := unitname.WorkerUnit("00000000", s, s); err == nil {
			_, i, m, err := unitname.ParseWorkerUnit(w)
			if err != nil || i != s || m != s {
				t.Fatalf("ParseWorkerUnit(%q) = _, %q, %q, %v; want %q twice", w, i, m, err, s)
			}
		}
		if compare && !strings.Contains(s, "\x00") {
			want, err := systemdEscape(t, "--", s)
			if err != nil || e != want {
				t.Fatalf("Escape(%q) = %q; systemd-escape says %q, %v", s, e, want, err)
			}
		}
	})
}

// FuzzParseUnitNames feeds arbitrary unit names to the parsers: they must
// not panic, and what they accept must build back into a name they parse
// to the same parts.
func FuzzParseUnitNames(f *testing.F) {
	for _, s := range []string{
		`legion-0123abcd-LEG\x2d12-implement.service`, `legion-0123abcd-a\x2fb-x.service`,
		`legion-0123abcd-a\x2Fb-x.service`, "legion@x.service", `legion@\xc3\xbc-a.service`,
		"legion-0123abcd-i-m.slice", `legion@a\x.service`, "legion--.service",
		`legion@\x00.service`, `legion-0123abcd-\x00-m.service`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if short, issue, mode, err := unitname.ParseWorkerUnit(name); err == nil {
			again, err := unitname.WorkerUnit(short, issue, mode)
			if err != nil {
				t.Fatalf("ParseWorkerUnit(%q) = %q, %q, %q; WorkerUnit of those: %v", name, short, issue, mode, err)
			}
			s2, i2, m2, err := unitname.ParseWorkerUnit(again)
			if err != nil || s2 != short || i2 != issue || m2 != mode {
				t.Fatalf("ParseWorkerUnit(%q) = %q, %q, %q, %v; want %q, %q, %q", again, s2, i2, m2, err, short, issue, mode)
			}
		}
		if team, err := unitname.ParseControllerUnit(name); err == nil {
			again, err := unitname.ControllerUnit(team)
			if err != nil {
				t.Fatalf("ParseControllerUnit(%q) = %q; ControllerUnit of it: %v", name, team, err)
			}
			if t2, err := unitname.ParseControllerUnit(again); err != nil || t2 != team {
				t.Fatalf("ParseControllerUnit(%q) = %q, %v; want %q", again, t2, err, team)
			}
		}
	})
}
