package units

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/units/hardening"
	"github.com/legion-dev/legion/units/unitname"
)

// InstallOptions says what `legion install` writes where.
type InstallOptions struct {
	// UnitDir receives the unit files, e.g. ~/.config/systemd/user.
	UnitDir string
	// Bin is the absolute path of the legion binary in every ExecStart=.
	Bin string
	// Defaults is the restart policy of legion@.service (see
	// GenerateOptions.Defaults). Required.
	Defaults RestartPolicy
	// Teams get a controller drop-in and a slice each; Legion's drop-ins
	// and slices of teams not listed are removed.
	Teams []TeamUnits
	// Web, when set, adds the dashboard's units (see GenerateOptions.Web);
	// legion-web.socket is enabled and started with legion.socket.
	Web *WebUnits
	// Enable lists teams whose controller instance legion@<team>.service is
	// enabled (started at login); each must be one of Teams.
	Enable []string
	// Packaged writes only the static units (legion.socket, legion.service,
	// legion@.service; the dashboard's units come with a user's own
	// `legion install`, which knows its address) into a system unit directory, for `make install` and
	// distribution packages: no teams, no removals, no manager, and
	// directories created 0755 rather than 0700.
	Packaged bool
	// DryRun prints every file (see WriteFiles) to Out and changes nothing:
	// no directory is created, no manager is called.
	DryRun bool
	Out    io.Writer
	// Manager reloads the user manager and enables units. Required unless
	// DryRun or Packaged.
	Manager *Manager
	// Unsupported are the directives this host cannot apply (see
	// GenerateOptions.Unsupported).
	Unsupported hardening.Unsupported
	// Kubernetes: a team runs its sessions on a cluster (see
	// GenerateOptions.Kubernetes). When that drop-in comes or goes, a
	// running helper is stopped, and legion.socket starts it again with
	// it at the next connection (its sessions run on).
	Kubernetes bool
}

// InstallResult says what Install did (or, with DryRun, would do). Paths
// are relative to the unit directory.
type InstallResult struct {
	Written   []string // files created or changed
	Unchanged []string // files that already had these bytes
	Removed   []string // Legion's files and links of teams no longer configured
	Enabled   []string // units enabled
	// WebError says why legion-web.socket could not be started (its
	// address taken); the rest of the install is done.
	WebError error
}

// Install writes Legion's unit files into o.UnitDir, removes Legion's
// drop-ins, slices and enablement links of teams that are no longer
// configured, reloads the manager and enables legion.socket (and starts
// it, so the CLI can reach the helper at once) and the controllers of the
// teams in o.Enable.
//
// Files are compared byte for byte and only changed ones are written
// (atomically: a temporary file renamed into place), so a second run with
// the same options changes no file. A file in the way that Legion did not
// write (its first line is not Header) is never overwritten: Install fails
// naming it, before writing anything.
func Install(ctx context.Context, o InstallOptions) (InstallResult, error) {
	var res InstallResult
	if o.UnitDir == "" {
		return res, errors.New("install: no unit directory given")
	}
	if o.Packaged && (len(o.Teams) > 0 || len(o.Enable) > 0) {
		return res, errors.New("install: a packaged install writes no teams and enables nothing")
	}
	if !o.DryRun && !o.Packaged && o.Manager == nil {
		return res, errors.New("install: no user manager to reload")
	}
	files, err := Generate(GenerateOptions{Bin: o.Bin, Defaults: o.Defaults, Teams: o.Teams, Web: o.Web, Unsupported: o.Unsupported, Kubernetes: o.Kubernetes})
	if err != nil {
		return res, fmt.Errorf("install: %w", err)
	}
	enable, err := unitsToEnable(o.Teams, o.Enable)
	if err != nil {
		return res, fmt.Errorf("install: %w", err)
	}
	if !o.Packaged {
		sockets := []string{unitname.SocketUnit}
		if o.Web != nil {
			sockets = append(sockets, unitname.WebSocketUnit)
		}
		enable = append(sockets, enable...)
	}

	var changed []File
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join(o.UnitDir, f.Path))
		switch {
		case err == nil && bytes.Equal(old, f.Data):
			res.Unchanged = append(res.Unchanged, f.Path)
			continue
		case err == nil && !isLegions(old):
			return res, fmt.Errorf("install: %s exists and was not written by legion (its first line is not Legion's header); move it away and run install again", filepath.Join(o.UnitDir, f.Path))
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return res, fmt.Errorf("install: read %s: %w", filepath.Join(o.UnitDir, f.Path), err)
		}
		changed = append(changed, f)
		res.Written = append(res.Written, f.Path)
	}
	var stale []string
	if !o.Packaged {
		stale, err = staleFiles(o.UnitDir, files, o.Teams)
		if err != nil {
			return res, fmt.Errorf("install: %w", err)
		}
	}
	res.Removed = stale
	res.Enabled = enable

	if o.DryRun {
		if o.Out != nil {
			if err := WriteFiles(o.Out, files); err != nil {
				return res, fmt.Errorf("install --dry-run: %w", err)
			}
		}
		return res, nil
	}

	dirMode := os.FileMode(0o700)
	if o.Packaged {
		dirMode = 0o755
	}
	if err := os.MkdirAll(o.UnitDir, dirMode); err != nil {
		return res, fmt.Errorf("install: create unit directory %s: %w", o.UnitDir, err)
	}
	for _, f := range changed {
		if err := writeAtomic(o.UnitDir, f, dirMode); err != nil {
			return res, fmt.Errorf("install: unit directory %s: %w", o.UnitDir, err)
		}
	}
	if err := removeAll(o.UnitDir, stale); err != nil {
		return res, fmt.Errorf("install: %w", err)
	}
	if o.Packaged {
		return res, nil
	}
	// Enabling reads the unit files from disk, so it goes first; the reload
	// then shows the manager the files and the new links together.
	if err := o.Manager.Enable(ctx, enable...); err != nil {
		return res, fmt.Errorf("install: %w", err)
	}
	if err := o.Manager.Reload(ctx); err != nil {
		return res, fmt.Errorf("install: %w", err)
	}
	if slices.Contains(res.Written, HelperKubeDropIn) || slices.Contains(res.Removed, HelperKubeDropIn) {
		// Its address families apply from its next start.
		if err := o.Manager.Stop(ctx, unitname.HelperUnit); err != nil {
			return res, fmt.Errorf("install: %w", err)
		}
	}
	if err := o.Manager.Start(ctx, unitname.SocketUnit); err != nil {
		return res, fmt.Errorf("install: %w", err)
	}
	if o.Web != nil {
		// A changed address needs the socket bound anew: stop it first
		// (a running server keeps its own copies and ends when idle).
		if slices.Contains(res.Written, unitname.WebSocketUnit) {
			if err := o.Manager.Stop(ctx, unitname.WebSocketUnit); err != nil {
				return res, fmt.Errorf("install: %w", err)
			}
		}
		// The dashboard is optional: a port taken by another program
		// must not keep the helper and the teams from being installed.
		if err := o.Manager.Start(ctx, unitname.WebSocketUnit); err != nil {
			res.WebError = fmt.Errorf("%w: is another program listening on %s? Set another port with [web] port in legion.toml, then run legion install again", err, o.Web.Listen)
		}
	}
	return res, nil
}

// unitsToEnable maps team names to controller instances, refusing teams
// that are not configured.
func unitsToEnable(teams []TeamUnits, enable []string) ([]string, error) {
	var names []string
	for _, team := range enable {
		if !slices.ContainsFunc(teams, func(t TeamUnits) bool { return t.Name == team }) {
			return nil, fmt.Errorf("enable team %q: no such team in the config", team)
		}
		name, err := unitname.ControllerUnit(team)
		if err != nil {
			return nil, fmt.Errorf("enable team %q: %w", team, err)
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// isLegions reports whether data is a file Legion wrote: its first line is
// exactly Header.
func isLegions(data []byte) bool {
	first, _, _ := bytes.Cut(data, []byte("\n"))
	return string(first) == Header
}

// isLegionsFile reports whether the file at path (following symlinks) is
// one Legion wrote. Only the first line is read.
func isLegionsFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, len(Header)+1)
	n, _ := io.ReadFull(f, buf)
	return string(buf[:n]) == Header+"\n"
}

// writeAtomic writes f under dir, replacing any older file atomically (see
// atomicfile.Write), so a reader never sees half a file.
func writeAtomic(dir string, f File, dirMode os.FileMode) error {
	dst := filepath.Join(dir, f.Path)
	if err := os.MkdirAll(filepath.Dir(dst), dirMode); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	if err := atomicfile.Write(dst, f.Data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

// staleFiles lists Legion's files under dir that files does not contain
// (drop-ins and slices of teams no longer configured), and enablement links
// of controller instances of teams not in teams, sorted.
func staleFiles(dir string, files []File, teams []TeamUnits) ([]string, error) {
	keep := map[string]bool{}
	for _, f := range files {
		keep[f.Path] = true
	}
	owned, err := legionsFiles(dir)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, p := range owned.files {
		if !keep[p] {
			stale = append(stale, p)
		}
	}
	for _, p := range owned.links {
		team, err := unitname.ParseControllerUnit(filepath.Base(p))
		if err != nil {
			continue // legion.socket and the like stay enabled
		}
		if !slices.ContainsFunc(teams, func(t TeamUnits) bool { return t.Name == team }) {
			stale = append(stale, p)
		}
	}
	slices.Sort(stale)
	return stale, nil
}

// owned is what Legion has under a unit directory.
type owned struct {
	files []string // regular files with Legion's header: units and drop-ins
	links []string // links in *.wants/ and *.requires/ to files with the header
}

// legionsFiles finds Legion's files under dir: regular files named legion*
// at the top, files in legion*.d/ drop-in directories, and symlinks named
// legion* in *.wants/, *.requires/ and *.upholds/ directories — each only if
// it (or its target) starts with Header. Paths are relative to dir. A
// missing dir has none.
func legionsFiles(dir string) (owned, error) {
	var o owned
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return o, nil
	}
	if err != nil {
		return o, fmt.Errorf("read unit directory %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.Type().IsRegular() && strings.HasPrefix(name, "legion"):
			if isLegionsFile(filepath.Join(dir, name)) {
				o.files = append(o.files, name)
			}
		case e.IsDir() && strings.HasPrefix(name, "legion") && strings.HasSuffix(name, ".d"):
			sub, err := os.ReadDir(filepath.Join(dir, name))
			if err != nil {
				return o, fmt.Errorf("read drop-in directory %s: %w", filepath.Join(dir, name), err)
			}
			for _, s := range sub {
				p := filepath.Join(name, s.Name())
				if s.Type().IsRegular() && isLegionsFile(filepath.Join(dir, p)) {
					o.files = append(o.files, p)
				}
			}
		case e.IsDir() && linkDir(name):
			sub, err := os.ReadDir(filepath.Join(dir, name))
			if err != nil {
				return o, fmt.Errorf("read %s: %w", filepath.Join(dir, name), err)
			}
			for _, s := range sub {
				p := filepath.Join(name, s.Name())
				if s.Type()&fs.ModeSymlink != 0 && strings.HasPrefix(s.Name(), "legion") && isLegionsFile(filepath.Join(dir, p)) {
					o.links = append(o.links, p)
				}
			}
		}
	}
	return o, nil
}

// linkDir reports whether d (relative to the unit directory) is a
// directory of dependency links such as default.target.wants.
func linkDir(d string) bool {
	return filepath.Dir(d) == "." && (strings.HasSuffix(d, ".wants") || strings.HasSuffix(d, ".requires") || strings.HasSuffix(d, ".upholds"))
}

// removeAll removes the paths (relative to dir), then each directory they
// were in that is now empty and was made for them: a legion*.d drop-in
// directory, or a *.wants/, *.requires/ or *.upholds/ directory of links
// (systemd's enable makes those and its disable leaves them).
func removeAll(dir string, paths []string) error {
	var errs []error
	dropInDirs := map[string]bool{}
	for _, p := range paths {
		if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %w", err))
			continue
		}
		if d := filepath.Dir(p); strings.HasPrefix(d, "legion") && strings.HasSuffix(d, ".d") || linkDir(d) {
			dropInDirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dropInDirs)) {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		if err == nil && len(entries) == 0 {
			err = os.Remove(filepath.Join(dir, d))
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove emptied directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// UninstallOptions says where `legion uninstall` looks.
type UninstallOptions struct {
	// UnitDir is where Install wrote, e.g. ~/.config/systemd/user.
	UnitDir string
	// DryRun prints what would be stopped and removed to Out ("stop <unit>",
	// "remove <path>" lines) and changes nothing.
	DryRun bool
	Out    io.Writer
	// Manager stops, resets and reloads. Required unless DryRun; a dry run
	// without one lists only files.
	Manager *Manager
}

// UninstallResult says what Uninstall did (or, with DryRun, would do).
type UninstallResult struct {
	Stopped []string // units, in the order they were stopped
	Reset   []string // failed units whose failed state was reset
	Removed []string // files and links, relative to the unit directory
}

// stopTimeout bounds the wait for one unit to stop: a controller stops its
// team's workers before it exits.
const stopTimeout = 3 * time.Minute

// Uninstall stops every loaded Legion unit — controllers first (each stops
// its team's workers), then workers, legion.socket (so nothing activates
// the helper again), legion.service and the slices — resets the failed
// ones, removes Legion's files from o.UnitDir (regular files and drop-ins
// whose first line is Header, links in *.wants/ and *.requires/ that point
// at such files, drop-in and link directories left empty) and reloads the manager.
// Files without the header are never touched, nor units whose names only
// look like Legion's. If a unit does not stop, no file is removed.
func Uninstall(ctx context.Context, o UninstallOptions) (UninstallResult, error) {
	var res UninstallResult
	if o.UnitDir == "" {
		return res, errors.New("uninstall: no unit directory given")
	}
	if !o.DryRun && o.Manager == nil {
		return res, errors.New("uninstall: no user manager")
	}
	found, err := legionsFiles(o.UnitDir)
	if err != nil {
		return res, fmt.Errorf("uninstall: %w", err)
	}
	res.Removed = append(found.links, found.files...)
	var loaded []State
	if o.Manager != nil {
		if loaded, err = legionsUnits(ctx, o.Manager); err != nil {
			return res, fmt.Errorf("uninstall: %w", err)
		}
	}
	if o.DryRun {
		for _, u := range loaded {
			res.Stopped = append(res.Stopped, u.Name)
		}
		if o.Out != nil {
			for _, u := range res.Stopped {
				fmt.Fprintf(o.Out, "stop %s\n", u)
			}
			for _, p := range res.Removed {
				if _, err := fmt.Fprintf(o.Out, "remove %s\n", filepath.Join(o.UnitDir, p)); err != nil {
					return res, fmt.Errorf("uninstall --dry-run: %w", err)
				}
			}
		}
		return res, nil
	}

	for _, u := range loaded {
		sctx, cancel := context.WithTimeout(ctx, stopTimeout)
		err := o.Manager.Stop(sctx, u.Name)
		cancel()
		if err != nil {
			return res, fmt.Errorf("uninstall: %w", err)
		}
		res.Stopped = append(res.Stopped, u.Name)
	}
	for _, u := range loaded {
		st, err := o.Manager.State(ctx, u.Name)
		if err != nil {
			return res, fmt.Errorf("uninstall: %w", err)
		}
		if !st.Failed() {
			continue
		}
		if err := o.Manager.ResetFailed(ctx, u.Name); err != nil && !errors.Is(err, ErrNoSuchUnit) {
			return res, fmt.Errorf("uninstall: %w", err)
		}
		res.Reset = append(res.Reset, u.Name)
	}
	if err := removeAll(o.UnitDir, res.Removed); err != nil {
		return res, fmt.Errorf("uninstall: %w", err)
	}
	if err := o.Manager.Reload(ctx); err != nil {
		return res, fmt.Errorf("uninstall: %w", err)
	}
	return res, nil
}

// legionsUnits lists the loaded units that are Legion's, in stop order:
// controllers, workers, the socket, the helper, team slices, legion.slice.
func legionsUnits(ctx context.Context, m *Manager) ([]State, error) {
	all, err := m.List(ctx, "legion@*.service", "legion-*.service", unitname.SocketUnit, unitname.HelperUnit, unitname.WebSocketUnit, "legion-*.slice", unitname.RootSlice)
	if err != nil {
		return nil, fmt.Errorf("list Legion's units: %w", err)
	}
	rank := func(name string) int {
		switch {
		case name == unitname.SocketUnit, name == unitname.WebSocketUnit:
			return 2
		case name == unitname.WebUnit:
			return 3
		case name == unitname.HelperUnit:
			return 3
		case name == unitname.RootSlice:
			return 5
		case strings.HasSuffix(name, ".slice"):
			if short, ok := strings.CutPrefix(strings.TrimSuffix(name, ".slice"), "legion-"); ok && unitname.CheckShortID(short) == nil {
				return 4
			}
		case strings.HasPrefix(name, "legion@"):
			if _, err := unitname.ParseControllerUnit(name); err == nil {
				return 0
			}
		default:
			if _, _, _, err := unitname.ParseWorkerUnit(name); err == nil {
				return 1
			}
		}
		return -1 // looks like Legion's, is not: leave it alone
	}
	var units []State
	for _, u := range all {
		if rank(u.Name) >= 0 {
			units = append(units, u)
		}
	}
	slices.SortStableFunc(units, func(a, b State) int { return rank(a.Name) - rank(b.Name) })
	return units, nil
}
