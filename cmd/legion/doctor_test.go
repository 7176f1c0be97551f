package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/doctor"
)

// TestDoctorJSON runs `legion doctor --json` where nothing is set up: the
// output is the documented JSON, and the command fails.
func TestDoctorJSON(t *testing.T) {
	dir := sandboxXDG(t)
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+dir+"/no-bus")
	stdout, _, err := legion(t, "doctor", "--json")
	if err == nil || !strings.Contains(err.Error(), "checks failed") {
		t.Errorf("legion doctor with no manager: err = %v; want checks failed", err)
	}
	var got struct {
		OK     bool           `json:"ok"`
		Checks []doctor.Check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("legion doctor --json printed no JSON: %v\n%s", err, stdout)
	}
	if got.OK {
		t.Errorf("legion doctor --json: ok = true; want false")
	}
	status := map[string]doctor.Status{}
	for _, c := range got.Checks {
		status[c.Name] = c.Status
	}
	for name, want := range map[string]doctor.Status{doctor.CheckConfig: doctor.Warn, doctor.CheckManager: doctor.Fail} {
		if status[name] != want {
			t.Errorf("check %q: status %q; want %q (all: %v)", name, status[name], want, status)
		}
	}
}

func TestDoctorText(t *testing.T) {
	dir := sandboxXDG(t)
	t.Setenv("XDG_RUNTIME_DIR", dir)
	stdout, _, _ := legion(t, "doctor")
	for _, want := range []string{"warn  config", "FAIL  systemd user manager", "fix: legion install"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("legion doctor output lacks %q:\n%s", want, stdout)
		}
	}
}
