package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/hostprobe"
)

// checkConfig loads legion.toml. It returns the config when it loaded
// (also when the file is missing: then it has no teams), nil when not.
func checkConfig(path string) (*config.Config, Check) {
	c := Check{Name: CheckConfig}
	cfg, err := config.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s does not exist: no teams configured", path)
		c.Fix = "legion team add NAME --workspace DIR"
		empty, err := config.Parse(path, nil)
		if err != nil {
			return nil, c
		}
		return empty, c
	case err != nil:
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = fmt.Sprintf("correct what is named above in %s; legion.toml(5) documents every key", path)
		return nil, c
	}
	names := make([]string, 0, len(cfg.Teams))
	for _, t := range cfg.Teams {
		names = append(names, t.Name)
	}
	c.Status = OK
	switch len(names) {
	case 0:
		c.Detail = path + ": loads; no teams configured"
	case 1:
		c.Detail = fmt.Sprintf("%s: loads; 1 team (%s)", path, names[0])
	default:
		c.Detail = fmt.Sprintf("%s: loads; %d teams (%s)", path, len(names), strings.Join(names, ", "))
	}
	return cfg, c
}

// worse returns the worse of two statuses.
func worse(a, b Status) Status {
	rank := map[Status]int{OK: 0, Warn: 1, Fail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// tomlKey quotes a team name as a TOML key when it is not a bare key.
func tomlKey(name string) string {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("%q", name)
		}
	}
	return name
}

// checkUnits: are the unit files in the unit directory what `legion
// install` would write now (this binary, the current config)? Asks
// units.Install for a dry run, which compares byte for byte.
func checkUnits(ctx context.Context, o Options, cfg *config.Config, rep hostprobe.Report) Check {
	c := Check{Name: CheckUnits}
	if cfg == nil {
		c.Status, c.Detail = Warn, "not checked: the config does not load"
		c.Fix = "fix the config first"
		return c
	}
	res, err := units.Install(ctx, units.InstallOptions{
		UnitDir:  o.UnitDir,
		Bin:      o.Bin,
		Defaults: units.RestartPolicy(config.DefaultTeam().Supervision()),
		Teams:    o.TeamUnits(cfg.Teams),
		Web:      &units.WebUnits{Listen: cfg.Web.Listen()},
		DryRun:   true,
		// What this host supports now: after a fix, files written
		// without a directive are out of date.
		Unsupported: rep.Unsupported(),
	})
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = "see the message; then run `legion install`"
		return c
	}
	var missing, changed []string
	for _, p := range res.Written {
		if _, err := os.Lstat(filepath.Join(o.UnitDir, p)); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		} else {
			changed = append(changed, p)
		}
	}
	if len(missing) == 0 && len(changed) == 0 && len(res.Removed) == 0 {
		c.Status = OK
		c.Detail = fmt.Sprintf("%s: %d files current (ExecStart=%s)", o.UnitDir, len(res.Unchanged), o.Bin)
		return c
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing: "+strings.Join(missing, ", "))
	}
	if len(changed) > 0 {
		parts = append(parts, "out of date: "+strings.Join(changed, ", "))
	}
	if len(res.Removed) > 0 {
		parts = append(parts, "left from teams no longer configured: "+strings.Join(res.Removed, ", "))
	}
	c.Status = Fail
	c.Detail = fmt.Sprintf("%s: %s (compared with what `legion install` writes for ExecStart=%s and the current config)",
		o.UnitDir, strings.Join(parts, "; "), o.Bin)
	c.Fix = "legion install"
	return c
}

// checkWeb: does the dashboard listen only where this machine alone can
// reach it? Another address is allowed (web.address) but warned about.
func checkWeb(cfg *config.Config) Check {
	c := Check{Name: CheckWeb}
	if cfg == nil {
		c.Status, c.Detail = Warn, "not checked: the config does not load"
		c.Fix = "fix the config first"
		return c
	}
	if cfg.Web.Local() {
		c.Status = OK
		c.Detail = fmt.Sprintf("legion-web.socket listens on %s and $XDG_RUNTIME_DIR/%s: this machine only; `legion web` prints the login URL", cfg.Web.Listen(), units.WebSocketPath)
		return c
	}
	c.Status = Warn
	c.Detail = fmt.Sprintf("legion-web.socket listens on %s (web.address in %s): other machines can reach the dashboard's login page over plain HTTP; only the token keeps them out", cfg.Web.Listen(), cfg.Path)
	c.Fix = `set web.address = "127.0.0.1" and reach the dashboard from elsewhere through SSH (ssh -L 7787:$XDG_RUNTIME_DIR/legion/web.sock HOST), then legion install`
	return c
}

// checkSocket: does the helper's socket exist, with mode 0600, and accept
// a connection? The connection is closed at once; with socket activation
// it starts legion.service, as any client would.
func checkSocket(ctx context.Context, runtimeDir string) Check {
	c := Check{Name: CheckSocket}
	path := filepath.Join(runtimeDir, filepath.FromSlash(units.SocketPath))
	fi, err := os.Stat(path)
	if err != nil {
		c.Status, c.Detail = Fail, fmt.Sprintf("%s: %v", path, unwrapPath(err))
		c.Fix = "systemctl --user enable --now legion.socket (`legion install` does this)"
		return c
	}
	if fi.Mode().Type() != fs.ModeSocket {
		c.Status, c.Detail = Fail, fmt.Sprintf("%s is not a socket (%v)", path, fi.Mode().Type())
		c.Fix = fmt.Sprintf("remove %s, then systemctl --user restart legion.socket", path)
		return c
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		c.Status, c.Detail = Fail, fmt.Sprintf("%s refuses connections: %v", path, unwrapPath(err))
		c.Fix = "systemctl --user restart legion.socket; see systemctl --user status legion.socket legion.service"
		return c
	}
	if err := conn.Close(); err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("%s accepted a connection, but closing it failed: %v", path, err)
		c.Fix = "see systemctl --user status legion.service"
		return c
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s accepts connections, but its mode is %#o: other users may connect (the helper refuses them)", path, perm)
		c.Fix = "legion install (legion.socket sets SocketMode=0600), then systemctl --user restart legion.socket"
		return c
	}
	c.Status, c.Detail = OK, path+" accepts connections"
	return c
}

// unwrapPath drops the path from *fs.PathError and *net.OpError messages
// where the detail names the path already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return unwrapPath(oe.Err)
	}
	return err
}
