package systemtest_test

import (
	"strings"
	"testing"

	"github.com/legion-dev/legion/contrib/demo"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units/unitname"
)

// denyUserNS is a drop-in for user@.service of the booted system: every
// user manager runs under a seccomp filter that refuses user namespaces
// (systemd's own RestrictNamespaces=), as on Ubuntu 24.04, whose AppArmor
// denies them to unprivileged programs.
const denyUserNS = "[Service]\nRestrictNamespaces=~user\n"

// TestIssueCycleDeniedUserNamespaces: as an ordinary user whose user
// manager may not create user namespaces, `legion install` leaves out
// PrivateUsers and the mount namespace directives this manager then
// refuses (found by trying, named with the fix), keeps the rest
// (NoNewPrivileges, the system call filter), every unit it writes starts
// (the helper, the controller, the dashboard, the workers), an issue goes
// Todo to Done, and doctor names what was left out.
func TestIssueCycleDeniedUserNamespaces(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: demo.Script("legion")})
	s.root("mkdir", "-p", "/etc/systemd/system/user@.service.d")
	s.writeFile("/etc/systemd/system/user@.service.d/90-deny-userns.conf", denyUserNS, 0o644, "root")
	s.root("systemctl", "daemon-reload")
	// The manager that lingering started before the drop-in goes; the
	// next login starts one under it.
	s.root("systemctl", "stop", "user@"+s.uid+".service")

	// The filter holds: no user namespace for the user's units.
	if out, err := s.Login(s.ctx, user, "systemd-run", "--user", "--wait", "--quiet", "-p", "PrivateUsers=yes", "true"); err == nil {
		t.Fatalf("a unit with PrivateUsers=yes started under the filter: %s", out)
	}

	s.login("legion", "team", "add", teamName, "--workspace", "src/web")
	installed, err := s.Login(s.ctx, user, "sh", "-c", "legion install --enable "+teamName+" 2>&1")
	if err != nil {
		t.Fatalf("legion install: %v\n%s", err, installed)
	}
	t.Logf("legion install:\n%s", installed)
	// An ordinary user's manager applies the mount namespace directives
	// only in a user namespace: without one it refuses them
	// (218/CAPABILITIES), so they go too, with the same fix.
	for _, want := range []string{"warning: left out PrivateUsers (user namespaces)", "217/USER", "apparmor_restrict_unprivileged_userns",
		"warning: left out ProtectSystem, PrivateDevices", "they need a user namespace"} {
		if !strings.Contains(installed, want) {
			t.Errorf("legion install does not say %q", want)
		}
	}
	for _, u := range []string{unitname.HelperUnit, unitname.ControllerTemplate, unitname.WebUnit} {
		text := s.login("systemctl", "--user", "cat", u)
		if strings.Contains(text, "PrivateUsers=") || strings.Contains(text, "ProtectSystem=") || !strings.Contains(text, "# Left out: this user manager cannot apply PrivateUsers, ProtectSystem") {
			t.Errorf("%s as installed:\n%s\nwant no PrivateUsers= or ProtectSystem= and a comment saying they were left out", u, text)
		}
		// What needs no namespace stays.
		if !strings.Contains(text, "NoNewPrivileges=yes") || !strings.Contains(text, "SystemCallFilter=") {
			t.Errorf("%s as installed lost the directives that need no namespace:\n%s", u, text)
		}
	}

	id := strings.TrimSpace(s.login("legion", "issue", "add", teamName, "Write a file"))
	s.login("systemctl", "--user", "start", "legion@"+teamName, unitname.WebUnit)
	s.waitStatus(id, controller.StatusDone)
	s.waitMerged(id)
	if state := s.unitShow(unitname.WebUnit, "ActiveState"); state != "active" {
		t.Errorf("%s is %s; want active", unitname.WebUnit, state)
	}

	doctor, _ := s.Login(s.ctx, user, "sh", "-c", "legion doctor 2>&1")
	t.Logf("legion doctor:\n%s", doctor)
	for _, want := range []string{"unit sandboxing", "leaves out what this user manager cannot apply: PrivateUsers", "apparmor_restrict_unprivileged_userns"} {
		if !strings.Contains(doctor, want) {
			t.Errorf("legion doctor does not say %q", want)
		}
	}
	if strings.Contains(doctor, "out of date") {
		t.Errorf("legion doctor finds the units just installed out of date")
	}
}
