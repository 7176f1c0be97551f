package claude

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legion-dev/legion/config"
)

// settingsJSON is a settings file as Claude Code reads it.
type settingsJSON struct {
	Hooks map[string][]struct {
		Matcher *string `json:"matcher"`
		Hooks   []struct {
			Type    string `json:"type"`
			Command string `json:"command"`
			Timeout int    `json:"timeout"`
		} `json:"hooks"`
	} `json:"hooks"`
	Permissions struct {
		Allow []string `json:"allow"`
	} `json:"permissions"`
	SkipDangerousModePermissionPrompt bool `json:"skipDangerousModePermissionPrompt"`
}

func parseSettings(t *testing.T, data []byte) settingsJSON {
	t.Helper()
	var s settingsJSON
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("settings file is not JSON: %v\n%s", err, data)
	}
	return s
}

func TestSettingsFor(t *testing.T) {
	const legion = "/opt/my tools/legion"
	cwd := t.TempDir()
	allow := []string{"Bash(make test)", "Bash(git:*)"} // a duplicate of Legion's own is dropped
	worktree := []string{"Read(/" + cwd + "/**)", "Edit(/" + cwd + "/**)", "Write(/" + cwd + "/**)"}
	tests := []struct {
		policy config.PermissionPolicy
		allow  []string
		skip   bool
	}{
		{
			policy: config.PermissionsAllowlist,
			allow: append(append([]string{
				"Bash(legion issue:*)", "Bash(" + legion + " issue:*)",
				"Bash(legion state:*)", "Bash(" + legion + " state:*)",
				"Bash(legion worktree finish:*)", "Bash(" + legion + " worktree finish:*)",
				"Bash(git:*)",
			}, worktree...), "Bash(make test)"),
		},
		{policy: config.PermissionsAsk, allow: []string{"Bash(legion issue:*)", "Bash(" + legion + " issue:*)"}},
		{policy: config.PermissionsBypass, skip: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			data, err := SettingsFor(tt.policy, legion, cwd, allow)
			if err != nil {
				t.Fatal(err)
			}
			s := parseSettings(t, data)
			var events []string
			for ev, matchers := range s.Hooks {
				events = append(events, ev)
				if len(matchers) != 1 || len(matchers[0].Hooks) != 1 || matchers[0].Matcher != nil {
					t.Errorf("hooks.%s = %+v; want one matcher (no matcher key: every tool) with one hook", ev, matchers)
					continue
				}
				h := matchers[0].Hooks[0]
				if h.Type != "command" || h.Command != `'/opt/my tools/legion' hook` {
					t.Errorf("hooks.%s hook = %+v; want the command '/opt/my tools/legion' hook", ev, h)
				}
				wantTimeout := 0
				if ev == "PermissionRequest" {
					wantTimeout = 86400
				}
				if h.Timeout != wantTimeout {
					t.Errorf("hooks.%s timeout = %d; want %d", ev, h.Timeout, wantTimeout)
				}
			}
			if diff := cmp.Diff(slices.Sorted(slices.Values(HookEvents)), slices.Sorted(slices.Values(events))); diff != "" {
				t.Errorf("hook events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.allow, s.Permissions.Allow); diff != "" {
				t.Errorf("permissions.allow (-want +got):\n%s", diff)
			}
			if s.SkipDangerousModePermissionPrompt != tt.skip {
				t.Errorf("skipDangerousModePermissionPrompt = %v; want %v", s.SkipDangerousModePermissionPrompt, tt.skip)
			}
		})
	}
	if _, err := SettingsFor("yolo", legion, cwd, nil); err == nil {
		t.Errorf("SettingsFor(policy yolo) = nil error; want one")
	}
}
