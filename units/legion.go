package units

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/legion-dev/legion/units/hardening"
	"github.com/legion-dev/legion/units/unitname"
)

// Timings of Legion's own units that are not a team's policy: the
// controller's watchdog (it feeds it after every tick, and a tick may take
// half of it).
const (
	controllerWatchdog = 60 * time.Second
)

// The helper's restart policy; see helperUnit.
const (
	helperStartLimitInterval = time.Minute
	helperStartLimitBurst    = 5
)

// SocketPath is the helper socket's path in the socket unit, relative to
// $XDG_RUNTIME_DIR (%t).
const SocketPath = "legion/legion.sock"

// WebSocketPath is the dashboard's unix socket in legion-web.socket,
// relative to $XDG_RUNTIME_DIR (%t): in the helper's 0700 directory, for
// SSH forwarding (ssh -L 7787:/run/user/UID/legion/web.sock).
const WebSocketPath = "legion/web.sock"

// The dashboard server's restart policy: like the helper's.
const (
	webStartLimitInterval = time.Minute
	webStartLimitBurst    = 5
)

// File is one generated file: its path relative to the unit directory
// ("legion.socket", "legion@x.service.d/50-legion.conf") and its bytes.
type File struct {
	Path string
	Data []byte
}

// TeamUnits is what the generators need to know about one team. The cmd
// layer fills it from the config (with its defaults applied); units never
// reads the config. The restart and start-limit settings are written as
// given, where zero means what it means to systemd (RestartSec=0: no pause;
// StartLimitIntervalSec=0 or StartLimitBurst=0: no start limit); zero
// resource limits are left out, meaning no limit.
type TeamUnits struct {
	Name               string        // team name, the controller's instance
	ShortID            string        // first 8 hex characters of the team UUID
	RestartCooldown    time.Duration // RestartSec= of the controller
	StartLimitInterval time.Duration // StartLimitIntervalSec= of the controller
	StartLimitBurst    uint32        // StartLimitBurst= of the controller
	MemoryMax          uint64        // bytes, MemoryMax= of the team slice
	CPUQuotaPercent    uint          // CPUQuota= of the team slice, 100 = one CPU
	TasksMax           uint64        // TasksMax= of the team slice

	// Per agent, in the drop-in of the team's workers; zero: no limit of
	// the agent's own (the slice's still holds).
	AgentMemoryMax uint64 // bytes, MemoryMax= of each worker unit
	AgentCPUWeight uint64 // CPUWeight= of each worker unit, 1 to 10000 (systemd's default is 100)
	// HardeningRelax and HardeningAdd change the workers' hardening (see
	// hardening.Worker): keys of hardening.WorkerDefaults to leave out, and
	// of hardening.WorkerOptional to add.
	HardeningRelax []string
	HardeningAdd   []string
}

// RestartPolicy is a controller's restart policy: RestartSec=,
// StartLimitIntervalSec= and StartLimitBurst=. Its fields are
// config.Supervision's, which converts to it, so that units links no
// config.
type RestartPolicy struct {
	RestartCooldown    time.Duration
	StartLimitInterval time.Duration
	StartLimitBurst    uint32
}

// GenerateOptions says which of Legion's unit files to generate.
type GenerateOptions struct {
	// Bin is the absolute path of the legion binary in every ExecStart=.
	Bin string
	// Defaults is the restart policy of the template legion@.service, for
	// an instance without a team drop-in: config's built-in defaults.
	// Required.
	Defaults RestartPolicy
	// Teams get a drop-in for their controller instance and a slice each.
	Teams []TeamUnits
	// Web, when set, adds the dashboard's units legion-web.socket and
	// legion-web.service.
	Web *WebUnits
	// Unsupported are the directives this host's user manager cannot
	// apply (units/hostprobe): they are left out of every unit, and each
	// file that lost some says which in a comment under the header.
	Unsupported hardening.Unsupported
	// Kubernetes, when a team's sessions run on a cluster, adds
	// HelperKubeDropIn (see helperKubeDropIn).
	Kubernetes bool
}

// HelperKubeDropIn is the drop-in of legion.service for teams on a
// cluster, relative to the unit directory.
var HelperKubeDropIn = unitname.HelperUnit + ".d/50-kubernetes.conf"

// helperKubeDropIn lets legion.service open IP sockets besides unix ones:
// its Kubernetes engine (legion-kube, a child of the helper) reaches the
// team's API server over TCP. A drop-in written only when a team has
// engine = "kubernetes", so every other helper keeps no network at all
// (hardening.Helper); RestrictAddressFamilies= lines add up.
func helperKubeDropIn() File {
	u := Unit{Name: HelperKubeDropIn, Options: []Option{
		FileOnly("Service", "RestrictAddressFamilies", "AF_INET AF_INET6", false),
	}}
	u.Comments = append(u.Comments, "A team runs its sessions on Kubernetes: the helper's engine (legion-kube) reaches the API server over IP.")
	return File{Path: HelperKubeDropIn, Data: u.File()}
}

// WebUnits is what the dashboard's units need: where the socket listens.
type WebUnits struct {
	// Listen is the TCP address, e.g. "127.0.0.1:7787" (config's
	// web.address and web.port). Required.
	Listen string
}

// Generate returns Legion's unit files, sorted by path: legion.socket,
// legion.service, legion@.service, and per team a drop-in
// legion@<team>.service.d/50-legion.conf, the slice legion-<short>.slice,
// and the drop-in of its workers legion-<short>-.service.d/50-legion.conf.
// Every file starts with Header. The output depends only on o.
func Generate(o GenerateOptions) ([]File, error) {
	if !filepath.IsAbs(o.Bin) {
		return nil, fmt.Errorf("legion binary %q: want an absolute path", o.Bin)
	}
	if o.Defaults == (RestartPolicy{}) {
		return nil, fmt.Errorf("no restart policy for %s: want config's defaults (restart cooldown, start limit)", unitname.ControllerTemplate)
	}
	u := o.Unsupported
	helper, template := helperUnit(o.Bin, u), controllerTemplate(o.Bin, o.Defaults, u)
	files := []File{
		{Path: unitname.SocketUnit, Data: socketUnit().File()},
		{Path: unitname.HelperUnit, Data: helper.File()},
		{Path: unitname.ControllerTemplate, Data: template.File()},
	}
	if o.Web != nil {
		if o.Web.Listen == "" {
			return nil, errors.New("dashboard units: no TCP address to listen on")
		}
		files = append(files,
			File{Path: unitname.WebSocketUnit, Data: webSocketUnit(*o.Web).File()},
			File{Path: unitname.WebUnit, Data: webUnit(o.Bin, u).File()})
	}
	if o.Kubernetes {
		files = append(files, helperKubeDropIn())
	}
	names := map[string]bool{}
	shorts := map[string]string{}
	for _, t := range o.Teams {
		if names[t.Name] {
			return nil, fmt.Errorf("team %q: configured twice", t.Name)
		}
		names[t.Name] = true
		if other, ok := shorts[t.ShortID]; ok {
			return nil, fmt.Errorf("teams %q and %q: same short id %s (first 8 hex characters of the id); give one a new id", other, t.Name, t.ShortID)
		}
		shorts[t.ShortID] = t.Name
		tf, err := teamFiles(t, u)
		if err != nil {
			return nil, err
		}
		files = append(files, tf...)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// socketUnit is legion.socket: the helper's socket under $XDG_RUNTIME_DIR,
// private to the user, started at login once enabled.
func socketUnit() Unit {
	return Unit{Name: unitname.SocketUnit, Options: []Option{
		String("Unit", "Description", "Legion control socket"),
		FileOnly("Socket", "ListenStream", "%t/"+SocketPath, true),
		FileOnly("Socket", "SocketMode", "0600", false),
		FileOnly("Socket", "DirectoryMode", "0700", false),
		Bool("Socket", "Accept", false),
		Bool("Socket", "RemoveOnStop", true),
		FileOnly("Install", "WantedBy", "sockets.target", false),
	}}
}

// helperUnit is legion.service, the helper: started by legion.socket (so it
// has no [Install] section), READY=1 once recovery is done.
//
// After a crash it is restarted at once (RestartSec=0), not after a pause:
// legion.socket keeps listening meanwhile, and a client that connected
// waits for the new helper's READY=1 (its start and recovery), as after a
// clean stop. A pause would only delay that client (a start job queued on a
// unit in auto-restart waits for the pause to end) and protects nothing,
// because the start limit stops a crash loop: at the 6th start within a
// minute (manual, socket-triggered and automatic starts all count) the
// helper stays failed, and so does legion.socket (a service that hit its
// start limit takes its socket down), until `systemctl --user reset-failed
// legion.service legion.socket && systemctl --user start legion.socket`.
// A minute rather than systemd's 10 s catches a helper that crashes a few
// seconds into each run, e.g. during recovery. Restart=on-failure rather
// than leaving the restart to the next connection has the helper back (and
// its recovery done) before its sessions.watch followers (controllers,
// `legion tmux`) dial again; the helper keeps no tmux views of its own.
func helperUnit(bin string, u hardening.Unsupported) Unit {
	return withHardening(Unit{Name: unitname.HelperUnit, Options: []Option{
		String("Unit", "Description", "Legion helper (control plane)"),
		FileOnly("Unit", "Requires", unitname.SocketUnit, false),
		FileOnly("Unit", "After", unitname.SocketUnit, false),
		Duration("Unit", "StartLimitIntervalSec", "StartLimitIntervalUSec", helperStartLimitInterval),
		Uint32("Unit", "StartLimitBurst", helperStartLimitBurst),
		String("Service", "Type", "notify"),
		Exec("ExecStart", []string{bin, "helper"}),
		String("Service", "Restart", "on-failure"),
		Duration("Service", "RestartSec", "RestartUSec", 0),
		FileOnly("Service", "ManagedOOMPreference", legionOOMPreference, false),
	}}, hardening.Helper(), u)
}

// webSocketUnit is legion-web.socket: the dashboard's TCP address and a
// unix socket beside the helper's (SSH forwarding reaches it without any
// TCP port), private to the user. Listening costs nothing: the server
// starts on the first connection.
func webSocketUnit(w WebUnits) Unit {
	return Unit{Name: unitname.WebSocketUnit, Options: []Option{
		String("Unit", "Description", "Legion web dashboard sockets"),
		FileOnly("Socket", "ListenStream", w.Listen, false),
		FileOnly("Socket", "ListenStream", "%t/"+WebSocketPath, true),
		FileOnly("Socket", "SocketMode", "0600", false),
		FileOnly("Socket", "DirectoryMode", "0700", false),
		Bool("Socket", "Accept", false),
		Bool("Socket", "RemoveOnStop", true),
		FileOnly("Install", "WantedBy", "sockets.target", false),
	}}
}

// webUnit is legion-web.service, the dashboard's server (`legion web
// serve`): started by legion-web.socket, READY=1 once it serves; it exits
// by itself when no page was connected for web.idle_exit, and the socket
// starts it again. Restarted on failure like the helper, with the same
// start limit.
func webUnit(bin string, u hardening.Unsupported) Unit {
	return withHardening(Unit{Name: unitname.WebUnit, Options: []Option{
		String("Unit", "Description", "Legion web dashboard"),
		FileOnly("Unit", "Requires", unitname.WebSocketUnit, false),
		FileOnly("Unit", "After", unitname.WebSocketUnit, false),
		Duration("Unit", "StartLimitIntervalSec", "StartLimitIntervalUSec", webStartLimitInterval),
		Uint32("Unit", "StartLimitBurst", webStartLimitBurst),
		String("Service", "Type", "notify"),
		Exec("ExecStart", []string{bin, "web", "serve"}),
		String("Service", "Restart", "on-failure"),
		Duration("Service", "RestartSec", "RestartUSec", time.Second),
		FileOnly("Service", "ManagedOOMPreference", legionOOMPreference, false),
	}}, hardening.Web(), u)
}

// withHardening is unit with the [Service] lines of the directives of set
// that the host supports (see package hardening for each one's reason)
// appended, and a comment naming those it does not.
func withHardening(unit Unit, set []hardening.Directive, u hardening.Unsupported) Unit {
	for _, d := range u.Supported(set) {
		unit.Options = append(unit.Options, FileOnly("Service", d.Key, d.Value, d.Specifiers))
	}
	if left := u.Left(set); len(left) > 0 {
		unit.Comments = append(unit.Comments, LeftOutComment(left))
	}
	return unit
}

// Keys are the unit-file keys of the sandboxing directives and resource
// limits that Generate may write for teams: those of the helper, the
// controllers, the dashboard and each team's workers, and the limits. A
// host probe's findings about other keys concern no unit.
func Keys(teams []TeamUnits) map[string]bool {
	keys := map[string]bool{"MemoryMax": true, "MemorySwapMax": true, "CPUQuota": true, "CPUWeight": true, "TasksMax": true}
	sets := [][]hardening.Directive{hardening.Helper(), hardening.Controller(), hardening.Web()}
	for _, t := range teams {
		if ds, err := hardening.Worker(t.HardeningRelax, t.HardeningAdd); err == nil {
			sets = append(sets, ds)
		}
	}
	for _, set := range sets {
		for _, d := range set {
			keys[d.Key] = true
		}
	}
	return keys
}

// LeftOutComment is the comment line of a unit file that lost the
// directives keys on this host.
func LeftOutComment(keys []string) string {
	return "Left out: this user manager cannot apply " + strings.Join(keys, ", ") + " (see `legion doctor`; after a fix, run `legion install` again)"
}

// controllerTemplate is legion@.service, one instance per team. %i is the
// escaped team name: `legion controller` gets it escaped and unescapes it
// (units.Unescape), so any team name survives the command line.
//
// Stopping and crashing differ on purpose. Workers are transient units of
// their own, never in this unit's cgroup, so no KillMode reaches them. On
// `systemctl --user stop legion@TEAM` the controller gets SIGTERM (KillMode=
// mixed sends it to the main process only) and stops the team's workers
// itself before exiting; the rest of its cgroup is killed after it. On a
// crash or a watchdog timeout (SIGABRT) the controller stops nothing, so
// its restart finds every agent still running. No BindsTo= is needed, and
// none would be right: it would stop workers on a crash too.
func controllerTemplate(bin string, d RestartPolicy, u hardening.Unsupported) Unit {
	opts := []Option{
		FileOnly("Unit", "Description", "Legion controller for team %I", true),
		FileOnly("Unit", "Wants", unitname.SocketUnit, false),
		FileOnly("Unit", "After", unitname.SocketUnit, false),
		Duration("Unit", "StartLimitIntervalSec", "StartLimitIntervalUSec", d.StartLimitInterval),
		Uint32("Unit", "StartLimitBurst", d.StartLimitBurst),
		String("Service", "Type", "notify"),
		ExecWithSpecifiers("ExecStart", []string{bin, "controller"}, "%i"),
		String("Service", "Restart", "on-failure"),
		Duration("Service", "RestartSec", "RestartUSec", d.RestartCooldown),
		Duration("Service", "WatchdogSec", "WatchdogUSec", controllerWatchdog),
		String("Service", "KillMode", "mixed"),
		FileOnly("Service", "ManagedOOMPreference", legionOOMPreference, false),
	}
	unit := withHardening(Unit{Name: unitname.ControllerTemplate, Options: opts}, hardening.Controller(), u)
	unit.Options = append(unit.Options, FileOnly("Install", "WantedBy", "default.target", false))
	return unit
}

// teamFiles are one team's drop-in for its controller instance, its
// slice, and the drop-in of its workers.
func teamFiles(t TeamUnits, u hardening.Unsupported) ([]File, error) {
	controller, err := unitname.ControllerUnit(t.Name)
	if err != nil {
		return nil, fmt.Errorf("team %q: %w", t.Name, err)
	}
	slice, err := unitname.TeamSlice(t.ShortID)
	if err != nil {
		return nil, fmt.Errorf("team %q: %w", t.Name, err)
	}
	dropInPath, err := unitname.DropInPath(t.Name)
	if err != nil {
		return nil, fmt.Errorf("team %q: %w", t.Name, err)
	}
	if t.RestartCooldown < 0 || t.StartLimitInterval < 0 {
		return nil, fmt.Errorf("team %q: negative restart cooldown %v or start limit interval %v", t.Name, t.RestartCooldown, t.StartLimitInterval)
	}
	dropIn := Unit{Name: controller, Options: []Option{
		Duration("Unit", "StartLimitIntervalSec", "StartLimitIntervalUSec", t.StartLimitInterval),
		Uint32("Unit", "StartLimitBurst", t.StartLimitBurst),
		String("Service", "Slice", slice),
		Duration("Service", "RestartSec", "RestartUSec", t.RestartCooldown),
	}}

	su := Unit{Name: slice, Options: []Option{
		String("Unit", "Description", "Legion team "+t.Name),
		// systemd-oomd, where it runs, kills one of the team's agents when
		// the slice's memory pressure stays high (the controller in it
		// opts out): see AgentOOMScoreAdjust.
		FileOnly("Slice", "ManagedOOMMemoryPressure", "kill", false),
	}}
	if t.MemoryMax > 0 {
		su.Options = append(su.Options, Uint64("Slice", "MemoryMax", t.MemoryMax))
	}
	if t.CPUQuotaPercent > 0 {
		su.Options = append(su.Options, CPUQuota("Slice", t.CPUQuotaPercent))
	}
	if t.TasksMax > 0 {
		su.Options = append(su.Options, Uint64("Slice", "TasksMax", t.TasksMax))
	}
	workers, err := workerDropIn(t, u)
	if err != nil {
		return nil, err
	}
	return []File{
		{Path: dropInPath, Data: dropIn.File()},
		{Path: slice, Data: su.File()},
		workers,
	}, nil
}

// workerDropIn is legion-<short>-.service.d/50-legion.conf, which systemd
// applies to every worker of the team (transient units named
// legion-<short>-<issue>-<mode>.service; see unitname.WorkerDropInPath):
// the team's worker hardening and each agent's own limits.
//
// A drop-in rather than properties of each transient unit, because this is
// the team's policy from legion.toml, and `legion install` is where that
// policy becomes systemd's (the slice's limits are there too): the helper
// stays team-agnostic (no spawn field carries it, ad-hoc `legion spawn`
// sessions of the team get it as well), `systemctl --user cat` shows it on
// every worker with its file, a person can override it with a drop-in of
// their own (60-*.conf), and systemd-analyze verify checks it. A change
// needs `legion install`, and applies to workers started after it.
func workerDropIn(t TeamUnits, unsupported hardening.Unsupported) (File, error) {
	path, err := unitname.WorkerDropInPath(t.ShortID)
	if err != nil {
		return File{}, fmt.Errorf("team %q: %w", t.Name, err)
	}
	ds, err := hardening.Worker(t.HardeningRelax, t.HardeningAdd)
	if err != nil {
		return File{}, fmt.Errorf("team %q: worker hardening: %w", t.Name, err)
	}
	if t.AgentCPUWeight > 10000 {
		return File{}, fmt.Errorf("team %q: agent CPU weight %d: want 1 to 10000", t.Name, t.AgentCPUWeight)
	}
	u := Unit{Name: path}
	// The limits first: an agent over MemoryMax= is OOM-killed alone (the
	// kernel picks within the unit's cgroup), its unit fails with result
	// oom-kill and Restart=on-failure resumes it; CPUWeight= is its share
	// against its neighbours when the CPU is busy.
	if t.AgentMemoryMax > 0 {
		// No swap beyond it: a runaway agent is killed rather than
		// swapping the machine to a crawl.
		u.Options = append(u.Options, Uint64("Service", "MemoryMax", t.AgentMemoryMax), Uint64("Service", "MemorySwapMax", 0))
	}
	if t.AgentCPUWeight > 0 {
		u.Options = append(u.Options, Uint64("Service", "CPUWeight", t.AgentCPUWeight))
	}
	u = withHardening(u, ds, unsupported)
	return File{Path: path, Data: u.File()}, nil
}

// WriteFiles prints files the way `legion install --dry-run` shows them:
// a line "---<path>---", then the file's text, for each file in order.
func WriteFiles(w io.Writer, files []File) error {
	for _, f := range files {
		if _, err := fmt.Fprintf(w, "---%s---\n%s", f.Path, f.Data); err != nil {
			return fmt.Errorf("print %s: %w", f.Path, err)
		}
	}
	return nil
}
