package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/followmodel"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// TestQuickStartDeniedUserNamespaces: on a host whose user manager may not
// create user namespaces (Ubuntu 24.04's AppArmor restriction, simulated
// with a seccomp filter on the private manager), where every unit with
// PrivateUsers=yes fails with 217/USER, the README's quick start still
// works: `legion install` leaves PrivateUsers out of every unit it
// writes, says so with the fix, and keeps what this manager applies
// without it; the helper, the controller, the dashboard and every worker
// start; the real Claude Code takes an issue from Todo to Done; and
// `legion doctor` names what was left out and the fix. Then, on the same
// files, a host that allows user namespaces again would get every
// directive back from `legion install` (TestProbeAllowed and the units'
// golden files show that side).
func TestQuickStartDeniedUserNamespaces(t *testing.T) {
	f := startFollowedOn(t, config.AgentClaude, followmodel.Traits{}, sdtest.Options{DenyUserNamespaces: true})

	for _, want := range []string{"warning: left out PrivateUsers (user namespaces)", "217/USER", "apparmor_restrict_unprivileged_userns"} {
		if !strings.Contains(f.installed, want) {
			t.Errorf("legion install printed %q; want it to say %q", f.installed, want)
		}
	}
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	cfg, err := config.Load(f.configPath)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := cfg.Team(teamName)
	workers, err := unitname.WorkerDropInPath(ct.ShortID())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{unitname.HelperUnit, unitname.ControllerTemplate, unitname.WebUnit, workers} {
		data, err := os.ReadFile(filepath.Join(unitDir, name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if strings.Contains(text, "PrivateUsers=") {
			t.Errorf("%s has PrivateUsers= on a host that refuses it:\n%s", name, text)
		}
		if !strings.Contains(text, "# "+units.LeftOutComment([]string{"PrivateUsers"})) {
			t.Errorf("%s does not say what it left out:\n%s", name, text)
		}
		// This manager (root's) applies the mount namespace without a
		// user namespace: the probe found so, and it stays.
		if !strings.Contains(text, "ProtectSystem=full") {
			t.Errorf("%s lost ProtectSystem=full, which this manager applies:\n%s", name, text)
		}
	}

	// The dashboard's server starts (the helper, the controller and the
	// workers show by the cycle below). Its socket listens on its unix
	// socket only: the TCP port is the machine's, which a test in another
	// package may hold.
	f.dropIn(filepath.Join(unitDir, unitname.WebSocketUnit+".d", "90-test.conf"), "[Socket]\nListenStream=\nListenStream=%t/"+units.WebSocketPath+"\n")
	for _, args := range [][]string{{"daemon-reload"}, {"reset-failed", unitname.WebSocketUnit}, {"restart", unitname.WebSocketUnit}, {"start", unitname.WebUnit}} {
		if out, err := f.sd.Systemctl(t, args...); err != nil {
			t.Errorf("systemctl --user %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	ctx, _ := f.questionToDone("hi", "the planner's question")

	// Doctor exits non-zero for what this sandbox lacks (no lingering);
	// its output is what counts here.
	out, _ := exec.CommandContext(ctx, f.bin, "doctor").CombinedOutput()
	doctor := string(out)
	for _, want := range []string{"unit sandboxing", "leaves out what this user manager cannot apply: PrivateUsers", "apparmor_restrict_unprivileged_userns"} {
		if !strings.Contains(doctor, want) {
			t.Errorf("legion doctor printed:\n%s\nwant it to say %q", doctor, want)
		}
	}
	t.Logf("legion install:\n%s\nlegion doctor:\n%s", f.installed, doctor)
	if strings.Contains(doctor, "out of date") {
		t.Errorf("legion doctor finds the units just installed out of date:\n%s", doctor)
	}
}
