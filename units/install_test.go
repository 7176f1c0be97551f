package units_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// installTeams are the teams of the install tests: a plain one and one
// whose name needs escaping.
var installTeams = []units.TeamUnits{
	{Name: "x", ShortID: "0000aaaa", RestartCooldown: 30 * time.Second, StartLimitInterval: 30 * time.Minute, StartLimitBurst: 5},
	{Name: "ünï team/y", ShortID: "0000bbbb", RestartCooldown: 5 * time.Second, StartLimitInterval: time.Minute, StartLimitBurst: 2, TasksMax: 100},
}

// fileState is what "nothing changed" compares: bytes, mode, mtime, inode.
type fileState struct {
	Data  string
	Mode  fs.FileMode
	MTime time.Time
	Inode uint64
}

// snapshot records every file and link under dir.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	snap := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var data []byte
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			data = []byte("-> " + target)
		} else if data, err = os.ReadFile(p); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		snap[rel] = fileState{Data: string(data), Mode: fi.Mode(), MTime: fi.ModTime(), Inode: fi.Sys().(*syscall.Stat_t).Ino}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return snap
}

func requireLoaded(t *testing.T, m *units.Manager, names ...string) {
	t.Helper()
	for _, name := range names {
		st, err := m.State(t.Context(), name)
		if err != nil {
			t.Fatalf("State(%s): %v", name, err)
		}
		if st.LoadState != "loaded" {
			t.Errorf("State(%s).LoadState = %q; want loaded", name, st.LoadState)
		}
	}
}

func TestInstallUninstall(t *testing.T) {
	_, m, ctx := setup(t)
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	bin := fakeBinary(t)
	xUnit, _ := unitname.ControllerUnit("x")
	yUnit, _ := unitname.ControllerUnit("ünï team/y")

	// A foreign unit and a foreign drop-in of Legion's controller: never touched.
	foreign := map[string]string{
		"foreign.service":                      "[Service]\nExecStart=/bin/true\n",
		xUnit + ".d/override.conf":             "[Service]\nEnvironment=MINE=1\n",
		"legion-mine.service":                  "# my own unit, not Legion's\n[Service]\nExecStart=/bin/true\n",
		"default.target.wants/foreign.service": "",
	}
	for p, data := range foreign {
		full := filepath.Join(unitDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(filepath.Dir(p), ".wants") {
			if err := os.Symlink("../foreign.service", full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	web := &units.WebUnits{Listen: freeAddr(t)}
	opts := units.InstallOptions{UnitDir: unitDir, Bin: bin, Defaults: defaults, Teams: installTeams, Web: web, Enable: []string{"x", "ünï team/y"}, Manager: m}
	res, err := units.Install(ctx, opts)
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	t.Logf("Install: %+v", res)
	if len(res.Written) != 11 || len(res.Unchanged) != 0 || len(res.Removed) != 0 {
		t.Errorf("first Install = %+v; want 11 files written", res)
	}
	requireLoaded(t, m, unitname.SocketUnit, unitname.HelperUnit, unitname.WebSocketUnit, unitname.WebUnit, xUnit, yUnit, "legion-0000bbbb.slice")
	for _, link := range []string{"sockets.target.wants/legion.socket", "sockets.target.wants/legion-web.socket", "default.target.wants/" + xUnit, "default.target.wants/" + yUnit} {
		if _, err := os.Stat(filepath.Join(unitDir, link)); err != nil {
			t.Errorf("enablement link %s: %v", link, err)
		}
	}
	sock := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), units.SocketPath)
	waitState(t, ctx, m, unitname.SocketUnit, "listening", func(s units.State) bool { return s.ActiveState == "active" })
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v, %v; want a socket with mode 0600", sock, fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket dir %s: %v; want mode 0700", filepath.Dir(sock), err)
	}
	// The dashboard's sockets listen (the server starts on a connection).
	waitState(t, ctx, m, unitname.WebSocketUnit, "listening", func(s units.State) bool { return s.ActiveState == "active" })
	webSock := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), units.WebSocketPath)
	if fi, err := os.Stat(webSock); err != nil || fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("dashboard socket %s: %v, %v; want a socket with mode 0600", webSock, fi, err)
	}
	if c, err := net.Dial("tcp", web.Listen); err != nil {
		t.Errorf("dial the dashboard's TCP socket %s: %v", web.Listen, err)
	} else {
		c.Close()
	}

	// Again: nothing changes, not even an mtime.
	before := snapshot(t, unitDir)
	res, err = units.Install(ctx, opts)
	if err != nil {
		t.Fatalf("second Install: %v", err)
	}
	if len(res.Written) != 0 || len(res.Removed) != 0 || len(res.Unchanged) != 11 {
		t.Errorf("second Install = %+v; want all 11 files unchanged", res)
	}
	if diff := cmp.Diff(before, snapshot(t, unitDir)); diff != "" {
		t.Errorf("second Install changed the unit dir (-before +after):\n%s", diff)
	}

	// Team y leaves the config: its drop-in, slice and link go, the rest stays.
	opts.Teams, opts.Enable = installTeams[:1], []string{"x"}
	res, err = units.Install(ctx, opts)
	if err != nil {
		t.Fatalf("Install without team y: %v", err)
	}
	wantRemoved := []string{"default.target.wants/" + yUnit, "legion-0000bbbb-.service.d/50-legion.conf", "legion-0000bbbb.slice", yUnit + ".d/50-legion.conf"}
	if diff := cmp.Diff(wantRemoved, res.Removed); diff != "" {
		t.Errorf("Install without team y removed (-want +got):\n%s", diff)
	}
	for _, dir := range []string{yUnit + ".d", "legion-0000bbbb-.service.d"} {
		if _, err := os.Stat(filepath.Join(unitDir, dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("empty drop-in dir %s of team y: %v; want it removed", dir, err)
		}
	}

	// A running worker and a failed one, as the helper would start them.
	worker, _ := unitname.WorkerUnit("0000aaaa", "LEG-1", "implement")
	failed, _ := unitname.WorkerUnit("0000aaaa", "LEG-2", "plan")
	if err := m.StartTransient(ctx, helperUnit(t, worker, "sleep", nil, units.String("Service", "Type", "notify"), units.String("Service", "Slice", "legion-0000aaaa.slice"))); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	if err := m.StartTransient(ctx, helperUnit(t, failed, "no-such-mode", nil)); err != nil {
		t.Fatalf("start failing worker: %v", err)
	}
	waitState(t, ctx, m, failed, "failed", func(s units.State) bool { return s.ActiveState == "failed" })
	foreignBefore := snapshot(t, unitDir)

	// Dry run: lists, changes nothing.
	var out bytes.Buffer
	dry, err := units.Uninstall(ctx, units.UninstallOptions{UnitDir: unitDir, DryRun: true, Out: &out, Manager: m})
	if err != nil {
		t.Fatalf("Uninstall --dry-run: %v", err)
	}
	for _, want := range []string{"stop " + xUnit + "\n", "stop " + worker + "\n", "stop legion.socket\n", "remove " + filepath.Join(unitDir, "legion@.service") + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Uninstall --dry-run printed:\n%s\nwant a line %q", &out, want)
		}
	}
	if diff := cmp.Diff(foreignBefore, snapshot(t, unitDir)); diff != "" {
		t.Errorf("Uninstall --dry-run changed the unit dir:\n%s", diff)
	}
	requireLoaded(t, m, worker, unitname.SocketUnit)

	res2, err := units.Uninstall(ctx, units.UninstallOptions{UnitDir: unitDir, Manager: m})
	if err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	t.Logf("Uninstall: %+v", res2)
	if diff := cmp.Diff(dry.Removed, res2.Removed); diff != "" {
		t.Errorf("Uninstall removed other files than its dry run listed (-dry +real):\n%s", diff)
	}
	if got := res2.Stopped; len(got) < 4 || !strings.HasPrefix(got[0], "legion@") {
		t.Errorf("Uninstall stopped %q; want the controller first, then workers, socket, helper, slices", got)
	}
	for _, name := range []string{unitname.SocketUnit, unitname.HelperUnit, unitname.WebSocketUnit, unitname.WebUnit, xUnit, worker, failed} {
		st, err := m.State(ctx, name)
		if err != nil {
			t.Fatalf("State(%s): %v", name, err)
		}
		if st.ActiveState == "active" || st.ActiveState == "failed" || (st.LoadState == "loaded" && name != xUnit) {
			t.Errorf("after Uninstall %s is %s/%s; want gone", name, st.LoadState, st.ActiveState)
		}
	}
	left, err := m.List(ctx, "legion*")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range left {
		if u.ActiveState == "active" || u.ActiveState == "failed" {
			t.Errorf("after Uninstall %s is still %s", u.Name, u.ActiveState)
		}
	}
	after := snapshot(t, unitDir)
	for p, st := range after {
		if strings.Contains(st.Data, units.Header) {
			t.Errorf("after Uninstall %s (Legion's) is still there", p)
		}
	}
	for p := range foreign {
		if diff := cmp.Diff(foreignBefore[p], after[p]); diff != "" {
			t.Errorf("Uninstall touched foreign %s (-before +after):\n%s", p, diff)
		}
	}
	wants, _ := filepath.Glob(filepath.Join(unitDir, "*.wants"))
	for _, d := range wants {
		if entries, err := os.ReadDir(d); err == nil && len(entries) == 0 {
			t.Errorf("after Uninstall %s is left empty; want it removed with Legion's links", d)
		}
	}
	if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket %s after Uninstall: %v; want it removed", sock, err)
	}

	// Nothing left: a second uninstall does nothing.
	res2, err = units.Uninstall(ctx, units.UninstallOptions{UnitDir: unitDir, Manager: m})
	if err != nil || len(res2.Removed) != 0 {
		t.Errorf("second Uninstall = %+v, %v; want nothing removed", res2, err)
	}
}

// freeAddr is a TCP address on 127.0.0.1 that nothing listened on a moment
// ago, for a socket unit of the test's manager.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestInstallDryRunTouchesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	var out bytes.Buffer
	res, err := units.Install(t.Context(), units.InstallOptions{UnitDir: dir, Bin: "/opt/legion dir/legion", Defaults: defaults, Teams: oddTeams, Enable: []string{"plain"}, DryRun: true, Out: &out})
	if err != nil {
		t.Fatalf("Install --dry-run: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Install --dry-run created %s (%v)", filepath.Dir(dir), err)
	}
	files, err := units.Generate(units.GenerateOptions{Bin: "/opt/legion dir/legion", Defaults: defaults, Teams: oddTeams})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := units.WriteFiles(&want, files); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), out.String()); diff != "" {
		t.Errorf("Install --dry-run output (-want +got):\n%s", diff)
	}
	if len(res.Written) != len(files) || !strings.HasPrefix(out.String(), "---legion-") {
		t.Errorf("Install --dry-run = %+v; want every file listed as to be written", res)
	}
	if diff := cmp.Diff([]string{"legion.socket", "legion@plain.service"}, res.Enabled); diff != "" {
		t.Errorf("Install --dry-run would enable (-want +got):\n%s", diff)
	}
}

func TestInstallErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	foreignDir := filepath.Join(tmp, "foreign")
	if err := os.MkdirAll(foreignDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreignDir, "legion.socket"), []byte("[Socket]\nListenStream=/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts units.InstallOptions
		want string
	}{
		{
			// A path below a regular file fails even for root, unlike chmod.
			name: "unwritable unit dir",
			opts: units.InstallOptions{UnitDir: filepath.Join(file, "units"), Bin: "/b/legion", Defaults: defaults, Packaged: true},
			want: "install: create unit directory " + filepath.Join(file, "units") + ": ",
		},
		{
			name: "foreign file in the way",
			opts: units.InstallOptions{UnitDir: foreignDir, Bin: "/b/legion", Defaults: defaults, Packaged: true},
			want: filepath.Join(foreignDir, "legion.socket") + " exists and was not written by legion",
		},
		{
			name: "enable unknown team",
			opts: units.InstallOptions{UnitDir: tmp, Bin: "/b/legion", Defaults: defaults, Teams: installTeams, Enable: []string{"nope"}, DryRun: true},
			want: `enable team "nope": no such team in the config`,
		},
		{
			name: "relative bin",
			opts: units.InstallOptions{UnitDir: tmp, Bin: "legion", Defaults: defaults, DryRun: true},
			want: `legion binary "legion": want an absolute path`,
		},
		{
			name: "no manager",
			opts: units.InstallOptions{UnitDir: tmp, Bin: "/b/legion", Defaults: defaults},
			want: "install: no user manager",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := units.Install(t.Context(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Install(%+v) error = %v; want one containing %q", tt.opts, err, tt.want)
			}
		})
	}
	if data, err := os.ReadFile(filepath.Join(foreignDir, "legion.socket")); err != nil || string(data) != "[Socket]\nListenStream=/x\n" {
		t.Errorf("foreign legion.socket after a refused install: %q, %v; want it untouched", data, err)
	}
	if entries, _ := os.ReadDir(foreignDir); len(entries) != 1 {
		t.Errorf("refused install left %d entries in %s; want only the foreign file", len(entries), foreignDir)
	}
}

// TestInstallUnwritableUnitDirWithManager: the same clear error when a
// manager is there (nothing is reloaded or enabled then).
func TestInstallUnwritableUnitDirWithManager(t *testing.T) {
	_, m, ctx := setup(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "units")
	_, err := units.Install(ctx, units.InstallOptions{UnitDir: dir, Bin: fakeBinary(t), Defaults: defaults, Teams: installTeams, Manager: m})
	if err == nil || !strings.Contains(err.Error(), "create unit directory "+dir) || !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Install into %s: %v; want an error naming the directory", dir, err)
	}
}

// TestCommandsWithoutManager runs the real binary with no manager in
// reach: install and uninstall fail with ErrNoManager's message, while
// --dry-run and --packaged need no manager.
func TestCommandsWithoutManager(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	tmp := t.TempDir()
	run := filepath.Join(tmp, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"XDG_RUNTIME_DIR="+run,
		"DBUS_SESSION_BUS_ADDRESS=unix:path="+filepath.Join(run, "no-bus"),
		"XDG_CONFIG_HOME="+filepath.Join(tmp, "config"),
		"HOME="+filepath.Join(tmp, "home"),
	)
	legion := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	for _, args := range [][]string{{"install"}, {"uninstall"}} {
		_, stderr, err := legion(args...)
		if err == nil || !strings.Contains(stderr, "no systemd user manager reachable") || !strings.Contains(stderr, "loginctl enable-linger") {
			t.Errorf("legion %s without a manager: %v, stderr %q; want ErrNoManager's message", args, err, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "config")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed install created %s", filepath.Join(tmp, "config"))
	}
	stdout, stderr, err := legion("install", "--dry-run", "--bin", "/usr/bin/legion")
	if err != nil || !strings.Contains(stdout, "---legion.socket---\n"+units.Header) || !strings.Contains(stdout, "ExecStart=/usr/bin/legion helper") {
		t.Errorf("legion install --dry-run: %v, stdout %q, stderr %q; want the files", err, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(tmp, "config")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("install --dry-run created %s", filepath.Join(tmp, "config"))
	}
	if _, stderr, err := legion("uninstall", "--dry-run"); err != nil {
		t.Errorf("legion uninstall --dry-run without a manager: %v, %s", err, stderr)
	}
	pkgDir := filepath.Join(tmp, "pkg")
	if _, stderr, err := legion("install", "--packaged", "--unit-dir", pkgDir, "--bin", "/usr/bin/legion"); err != nil {
		t.Errorf("legion install --packaged: %v, %s", err, stderr)
	}
	entries, _ := os.ReadDir(pkgDir)
	if len(entries) != 3 {
		t.Errorf("install --packaged wrote %d entries; want the 3 static units", len(entries))
	}
	_, stderr, err = legion("install", "--enable", "nope", "--dry-run")
	if err == nil || !strings.Contains(stderr, `--enable "nope": no team of that name in `) {
		t.Errorf("legion install --enable nope: %v, %q; want an error naming the team", err, stderr)
	}
}

// TestCommandsAgainstManager runs `legion install` and `legion uninstall`
// from the real binary against a private manager, with a config file.
func TestCommandsAgainstManager(t *testing.T) {
	sd, m, ctx := setup(t)
	bin := sdtest.LegionBinary(t)
	cfgDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion")
	ws := filepath.Join(sd.Home, "ws")
	for _, d := range []string{cfgDir, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := "[teams.\"demo team\"]\nid = \"d3b07384-d9a0-4c9b-8a5e-2f6a1c0b7e11\"\nworkspace = \"" + ws + "\"\nrestart_cooldown = \"7s\"\n"
	if err := os.WriteFile(filepath.Join(cfgDir, "legion.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	legion := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		// No system bus, so no logind, wherever the test runs.
		cmd.Env = append(slices.Clone(sd.Env), "DBUS_SYSTEM_BUS_ADDRESS=unix:path="+filepath.Join(sd.Home, "no-system-bus"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("legion %s: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// The sandbox has no logind: install says lingering is unknown.
	if out := legion("install", "--enable", "demo team"); !strings.Contains(out, "note: lingering: no logind: lingering unknown") {
		t.Errorf("legion install printed %q; want the lingering note", out)
	}
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	exe, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(unitDir, "legion.service"))
	if err != nil || !strings.Contains(string(data), "ExecStart="+units.QuoteArg(exe)+" helper\n") {
		t.Errorf("legion.service: %v\n%s\nwant ExecStart= with the binary's resolved path %s", err, data, exe)
	}
	dropIn, err := os.ReadFile(filepath.Join(unitDir, `legion@demo\x20team.service.d`, "50-legion.conf"))
	if err != nil || !strings.Contains(string(dropIn), "RestartSec=7s\n") || !strings.Contains(string(dropIn), "Slice=legion-d3b07384.slice\n") {
		t.Errorf("drop-in of team %q: %v\n%s", "demo team", err, dropIn)
	}
	requireLoaded(t, m, unitname.SocketUnit, unitname.HelperUnit, `legion@demo\x20team.service`)
	if out := legion("install"); !strings.Contains(out, "unit files up to date") {
		t.Errorf("second legion install printed %q; want it to say the files are up to date", out)
	}
	legion("uninstall")
	st, err := m.State(ctx, unitname.SocketUnit)
	if err != nil || st.ActiveState == "active" {
		t.Errorf("legion.socket after legion uninstall: %+v, %v", st, err)
	}
	if entries, _ := os.ReadDir(unitDir); len(entries) > 2 { // the emptied *.wants dirs may stay
		t.Errorf("unit dir after uninstall holds %d entries", len(entries))
	}
}

// TestMakeInstall runs `make install PREFIX=/usr DESTDIR=<tmp>` and checks
// that the binaries and exactly the three static units land there with
// ExecStart=/usr/bin/legion, that the units pass systemd-analyze verify and
// that legion finds its worker at /usr/libexec/legion. Both need the files
// at their /usr paths, which are only under DESTDIR, so they run in a
// private mount namespace where /usr is an overlay of DESTDIR/usr on the
// real one (root, unshare and overlayfs needed; the host's /usr is never
// changed).
func TestMakeInstall(t *testing.T) {
	_, err := exec.LookPath("make")
	sdtest.Require(t, "make on $PATH", err == nil)
	_, err = exec.LookPath("unshare")
	sdtest.Require(t, "unshare (util-linux) on $PATH", err == nil)
	sdtest.Require(t, "running as root (for a private mount namespace)", os.Geteuid() == 0)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	destdir := t.TempDir()
	cmd := exec.Command("make", "-C", root, "install", "PREFIX=/usr", "DESTDIR="+destdir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, bin := range []string{"usr/bin/legion", "usr/libexec/legion/legion-pty-worker"} {
		if fi, err := os.Stat(filepath.Join(destdir, bin)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s under DESTDIR: %v, %v; want mode 0755", bin, fi, err)
		}
	}
	unitDir := filepath.Join(destdir, "usr/lib/systemd/user")
	entries, err := os.ReadDir(unitDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		data, err := os.ReadFile(filepath.Join(unitDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "ExecStart=") && !strings.Contains(string(data), "ExecStart=/usr/bin/legion ") {
			t.Errorf("%s:\n%s\nwant ExecStart=/usr/bin/legion", e.Name(), data)
		}
	}
	if diff := cmp.Diff([]string{"legion.service", "legion.socket", "legion@.service"}, names); diff != "" {
		t.Errorf("units under DESTDIR (-want +got):\n%s", diff)
	}

	runtime := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	script := `set -e
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=$1/usr:/usr" /usr
systemd-analyze --user verify legion.socket legion.service legion@x.service
/usr/bin/legion doctor --json >"$2" 2>/dev/null || true # some checks fail here: no manager`
	doctorOut := filepath.Join(t.TempDir(), "doctor.json")
	verify := exec.Command("unshare", "-m", "sh", "-c", script, "sh", destdir, doctorOut)
	verify.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime, "SYSTEMD_UNIT_PATH="+unitDir+":")
	var stderr bytes.Buffer
	verify.Stderr = &stderr
	if err := verify.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("systemd-analyze --user verify of the packaged units (in a namespace with /usr/bin/legion): %v\n%s", err, &stderr)
	}
	var doctor struct {
		Checks []struct{ Name, Status, Detail string }
	}
	data, err := os.ReadFile(doctorOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &doctor); err != nil {
		t.Fatalf("legion doctor --json: %v\n%s", err, data)
	}
	want := "/usr/libexec/legion/legion-pty-worker (legion-pty-worker "
	found := false
	for _, c := range doctor.Checks {
		if c.Name == "pty worker" {
			found = true
			if c.Status != "ok" || !strings.HasPrefix(c.Detail, want) {
				t.Errorf("installed legion's doctor: pty worker %s: %s; want ok: %s...", c.Status, c.Detail, want)
			}
		}
	}
	if !found {
		t.Errorf("installed legion's doctor has no pty worker check: %+v", doctor.Checks)
	}
}

// TestInstallWebPortTaken: a dashboard address another program holds
// fails only the dashboard's socket, with a message naming the address;
// the helper's socket and the rest are installed.
func TestInstallWebPortTaken(t *testing.T) {
	_, m, ctx := setup(t)
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	res, err := units.Install(ctx, units.InstallOptions{UnitDir: unitDir, Bin: fakeBinary(t), Defaults: defaults, Web: &units.WebUnits{Listen: l.Addr().String()}, Manager: m})
	if err != nil {
		t.Fatalf("Install with the dashboard's port taken: %v; want only WebError", err)
	}
	if res.WebError == nil || !strings.Contains(res.WebError.Error(), l.Addr().String()) {
		t.Errorf("Install's WebError = %v; want an error naming %s", res.WebError, l.Addr())
	}
	waitState(t, ctx, m, unitname.SocketUnit, "listening", func(s units.State) bool { return s.ActiveState == "active" })
	if _, err := units.Uninstall(ctx, units.UninstallOptions{UnitDir: unitDir, Manager: m}); err != nil {
		t.Errorf("Uninstall: %v", err)
	}
}

// TestInstallKubernetesDropIn: with a team on a cluster, legion.service
// gets IP sockets through a drop-in of its own, which the manager applies
// (the Kubernetes engine, the helper's child, reaches the API server);
// without one the drop-in goes and the helper has unix sockets only.
func TestInstallKubernetesDropIn(t *testing.T) {
	sd, m, ctx := setup(t)
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	opts := units.InstallOptions{UnitDir: unitDir, Bin: fakeBinary(t), Defaults: defaults, Teams: installTeams, Manager: m, Kubernetes: true}
	families := func() string {
		t.Helper()
		out, err := sd.Systemctl(t, "show", "-p", "RestrictAddressFamilies", "--value", unitname.HelperUnit)
		if err != nil {
			t.Fatalf("systemctl show: %v: %s", err, out)
		}
		f := strings.Fields(out)
		slices.Sort(f)
		return strings.Join(f, " ")
	}
	res, err := units.Install(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Written, units.HelperKubeDropIn) {
		t.Errorf("Install with a team on a cluster wrote %q; want %s", res.Written, units.HelperKubeDropIn)
	}
	if got := families(); got != "AF_INET AF_INET6 AF_UNIX" {
		t.Errorf("legion.service's RestrictAddressFamilies = %q; want AF_INET AF_INET6 AF_UNIX", got)
	}
	opts.Kubernetes = false
	if res, err = units.Install(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Removed, units.HelperKubeDropIn) {
		t.Errorf("Install with no team on a cluster removed %q; want %s", res.Removed, units.HelperKubeDropIn)
	}
	if got := families(); got != "AF_UNIX" {
		t.Errorf("legion.service's RestrictAddressFamilies = %q; want AF_UNIX alone", got)
	}
}
