package units_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/hardening"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// defaults is the template's restart policy: config's, as `legion
// install` passes it.
var defaults = units.RestartPolicy(config.DefaultTeam().Supervision())

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the generators")

// oddTeams are teams whose names and limits exercise escaping and every
// optional line.
var oddTeams = []units.TeamUnits{
	{
		Name: "ünï team/x", ShortID: "abcdef01",
		RestartCooldown: 45 * time.Second, StartLimitInterval: 5 * time.Minute, StartLimitBurst: 3,
		MemoryMax: 1 << 30, CPUQuotaPercent: 150, TasksMax: 200,
		AgentMemoryMax: 512 << 20, AgentCPUWeight: 200,
		HardeningRelax: []string{"PrivateDevices"}, HardeningAdd: []string{"PrivateTmp", "SystemCallArchitectures"},
	},
	{Name: "plain", ShortID: "12345678"},
	{Name: "100% -.dots", ShortID: "0000beef", RestartCooldown: 1500 * time.Millisecond, StartLimitInterval: 30 * time.Minute, StartLimitBurst: 5, TasksMax: 64},
}

var generateCases = []struct {
	name string
	opts units.GenerateOptions
}{
	{name: "packaged", opts: units.GenerateOptions{Bin: "/usr/bin/legion", Defaults: defaults}},
	{name: "teams", opts: units.GenerateOptions{Bin: "/opt/legion dir/100%/legion", Defaults: defaults, Teams: oddTeams, Web: &units.WebUnits{Listen: "[::1]:8080"}}},
}

func TestGenerateGolden(t *testing.T) {
	for _, tc := range generateCases {
		t.Run(tc.name, func(t *testing.T) {
			files, err := units.Generate(tc.opts)
			if err != nil {
				t.Fatalf("Generate(%+v): %v", tc.opts, err)
			}
			var got bytes.Buffer
			if err := units.WriteFiles(&got, files); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden file (refresh with go test ./units -update): %v", err)
			}
			if diff := cmp.Diff(string(want), got.String()); diff != "" {
				t.Errorf("Generate(%+v) differs from %s (-want +got; refresh with -update):\n%s", tc.opts, golden, diff)
			}
			again, err := units.Generate(tc.opts)
			if err != nil || !cmp.Equal(files, again) {
				t.Errorf("Generate(%+v) is not deterministic", tc.opts)
			}
			for _, f := range files {
				if !bytes.HasPrefix(f.Data, []byte(units.Header+"\n")) {
					t.Errorf("%s does not start with units.Header", f.Path)
				}
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name string
		opts units.GenerateOptions
		want string // part of the error message
	}{
		{"relative bin", units.GenerateOptions{Bin: "legion", Defaults: defaults}, `legion binary "legion": want an absolute path`},
		{"empty bin", units.GenerateOptions{}, "want an absolute path"},
		{"no defaults", units.GenerateOptions{Bin: "/b"}, "no restart policy for legion@.service"},
		{"twice", units.GenerateOptions{Bin: "/b", Defaults: defaults, Teams: []units.TeamUnits{{Name: "a", ShortID: "00000000"}, {Name: "a", ShortID: "00000001"}}}, `team "a": configured twice`},
		{"same short", units.GenerateOptions{Bin: "/b", Defaults: defaults, Teams: []units.TeamUnits{{Name: "a", ShortID: "00000000"}, {Name: "b", ShortID: "00000000"}}}, `teams "a" and "b": same short id 00000000`},
		{"bad short", units.GenerateOptions{Bin: "/b", Defaults: defaults, Teams: []units.TeamUnits{{Name: "a", ShortID: "XYZ"}}}, `team "a": team short id "XYZ"`},
		{"negative", units.GenerateOptions{Bin: "/b", Defaults: defaults, Teams: []units.TeamUnits{{Name: "a", ShortID: "00000000", RestartCooldown: -time.Second}}}, `team "a": negative restart cooldown -1s`},
		{"empty name", units.GenerateOptions{Bin: "/b", Defaults: defaults, Teams: []units.TeamUnits{{ShortID: "00000000"}}}, `team "": team name is empty`},
		{"bad hardening", units.GenerateOptions{Bin: "/b", Defaults: defaults, Teams: []units.TeamUnits{{Name: "a", ShortID: "00000000", HardeningAdd: []string{"ProtectHome"}}}}, `team "a": worker hardening: add: unknown directive "ProtectHome"`},
		{"cpu weight", units.GenerateOptions{Bin: "/b", Defaults: defaults, Teams: []units.TeamUnits{{Name: "a", ShortID: "00000000", AgentCPUWeight: 10001}}}, `team "a": agent CPU weight 10001: want 1 to 10000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := units.Generate(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Generate(%+v) error = %v; want one containing %q", tt.opts, err, tt.want)
			}
		})
	}
}

// fakeBinary makes an executable file at a path with a space and a % in
// it, for ExecStart= lines that systemd-analyze verify checks.
func fakeBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin dir%x", "legion")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin
}

// writeFiles puts files under dir as install would.
func writeFiles(t *testing.T, dir string, files []units.File) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// verifyUnits runs `systemd-analyze --user verify` on the named units found
// in unitDir (searched first, then systemd's defaults for basic.target and
// friends) and fails on a non-zero exit or anything on stderr. Templates are
// verified through an instance name, which also loads its drop-ins.
func verifyUnits(t *testing.T, unitDir string, names ...string) {
	t.Helper()
	stdout, stderr, err := runVerify(t, unitDir, names...)
	if err != nil || stderr != "" {
		t.Errorf("systemd-analyze --user verify %q: %v\nstdout:\n%s\nstderr:\n%s", names, err, stdout, stderr)
	}
}

func runVerify(t *testing.T, unitDir string, names ...string) (stdout, stderr string, err error) {
	t.Helper()
	_, err = exec.LookPath("systemd-analyze")
	sdtest.Require(t, "systemd-analyze (Debian package systemd) on $PATH", err == nil)
	runtime := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", append([]string{"--user", "verify", "--"}, names...)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime, "SYSTEMD_UNIT_PATH="+unitDir+":")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// unitNamesToVerify lists the units to verify for files: each unit file by
// name, the template through an instance, each team's instance (with its
// drop-in), and for each team's worker drop-in a stand-in worker unit
// (workers are transient: no file of theirs exists) that it writes into
// dir, running bin.
func unitNamesToVerify(t *testing.T, dir, bin string, files []units.File) []string {
	t.Helper()
	var names []string
	for _, f := range files {
		switch {
		case f.Path == unitname.ControllerTemplate:
			names = append(names, "legion@x.service")
		case strings.HasSuffix(filepath.Dir(f.Path), "-.service.d"):
			worker := strings.TrimSuffix(filepath.Dir(f.Path), ".service.d") + "X\\x2d1-implement.service"
			writeFiles(t, dir, []units.File{{Path: worker, Data: []byte("[Service]\nExecStart=" + units.QuoteArg(bin) + "\n")}})
			names = append(names, worker)
		case strings.Contains(f.Path, "/"):
			names = append(names, strings.TrimSuffix(filepath.Dir(f.Path), ".d"))
		default:
			names = append(names, f.Path)
		}
	}
	return names
}

func TestGenerateVerify(t *testing.T) {
	bin := fakeBinary(t)
	files, err := units.Generate(units.GenerateOptions{Bin: bin, Defaults: defaults, Teams: oddTeams, Web: &units.WebUnits{Listen: "127.0.0.1:7787"}, Kubernetes: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, files)
	verifyUnits(t, dir, unitNamesToVerify(t, dir, bin, files)...)
}

// TestVerifyCatchesErrors makes sure runVerify would notice a broken
// file: otherwise an empty stderr proves nothing.
func TestVerifyCatchesErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, []units.File{{Path: "bad.service", Data: []byte("[Service]\nExecStart=/bin/true\nNoSuchKey=1\n")}})
	_, stderr, _ := runVerify(t, dir, "bad.service") // unknown keys only warn: exit status 0
	if !strings.Contains(stderr, "NoSuchKey") {
		t.Errorf("systemd-analyze verify of a unit with an unknown key: stderr %q; want a warning naming NoSuchKey", stderr)
	}
}

// TestGenerateUnsupported: what the host cannot apply is left out of every
// unit and worker drop-in, each file that lost something says which in a
// comment under the header, the rest of each file is what a host with
// everything gets, and systemd-analyze verify still accepts them.
func TestGenerateUnsupported(t *testing.T) {
	bin := fakeBinary(t)
	o := units.GenerateOptions{Bin: bin, Defaults: defaults, Teams: oddTeams, Web: &units.WebUnits{Listen: "127.0.0.1:7787"}}
	full, err := units.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Unsupported = hardening.Unsupported{"PrivateUsers": "a unit with it failed to start with 217/USER", "PrivateDevices": "218/CAPABILITIES"}
	less, err := units.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(less) != len(full) {
		t.Fatalf("%d files; want %d", len(less), len(full))
	}
	lost := 0
	for i, f := range less {
		want := string(full[i].Data)
		var left []string
		for _, k := range []string{"PrivateUsers", "PrivateDevices"} {
			if strings.Contains(want, k+"=yes\n") {
				left = append(left, k)
				want = strings.Replace(want, k+"=yes\n", "", 1)
			}
		}
		if len(left) > 0 {
			lost++
			want = strings.Replace(want, units.Header+"\n", units.Header+"\n# "+units.LeftOutComment(left)+"\n", 1)
		}
		if got := string(f.Data); got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", f.Path, got, want)
		}
	}
	// The helper, the controllers, the dashboard, and each team's workers.
	if lost != 3+len(oddTeams) {
		t.Errorf("%d files had PrivateUsers=yes; want %d", lost, 3+len(oddTeams))
	}
	dir := t.TempDir()
	writeFiles(t, dir, less)
	verifyUnits(t, dir, unitNamesToVerify(t, dir, bin, less)...)
}
