package units

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestControllersIn(t *testing.T) {
	const managerCg = "/user.slice/user-1000.slice/user@1000.service"
	tests := []struct {
		name        string
		cgroup2     bool
		dirs        []string // made under the root
		controllers string   // cgroup.controllers of the manager's cgroup; "-" for none
		proc        string
		want        Controllers
		why         string // part of Why
		err         string
	}{
		{name: "delegated", cgroup2: true, controllers: "cpu memory pids\n", proc: "0::" + managerCg + "/init.scope\n", want: Controllers{Memory: true, CPU: true}},
		{name: "no cpu", cgroup2: true, controllers: "memory pids\n", proc: "0::" + managerCg + "/init.scope\n", want: Controllers{Memory: true}, why: `has no cpu (CPUWeight=) controller (it has: "memory pids")`},
		{name: "none", cgroup2: true, controllers: "\n", proc: "0::" + managerCg + "/init.scope\n", why: "has no memory (MemoryMax=) or cpu (CPUWeight=) controller"},
		{name: "no cgroup2 line", cgroup2: true, controllers: "-", proc: "1:name=systemd:/x\n", err: "no cgroup2 line (0::)"},
		{name: "unreadable", cgroup2: true, controllers: "-", proc: "0::" + managerCg + "/init.scope\n", err: "read the user manager's controllers"},
		{name: "hybrid", dirs: []string{"unified", "memory"}, proc: "0::/\n", why: "cgroups here are hybrid: the memory controller is bound to cgroup v1"},
		{name: "legacy", dirs: []string{"memory"}, proc: "", why: "cgroups here are cgroup v1 (legacy)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tt.dirs {
				if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.controllers != "-" && tt.cgroup2 {
				dir := filepath.Join(root, managerCg)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte(tt.controllers), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := controllersIn(root, tt.cgroup2, "/proc/1/cgroup", []byte(tt.proc))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("controllersIn() error = %v; want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Memory != tt.want.Memory || got.CPU != tt.want.CPU || !strings.Contains(got.Why, tt.why) || (tt.why == "") != (got.Why == "") {
				t.Errorf("controllersIn() = %+v; want memory %v, cpu %v, why containing %q", got, tt.want.Memory, tt.want.CPU, tt.why)
			}
		})
	}
}
