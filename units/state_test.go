package units

import "testing"

func TestStatePredicates(t *testing.T) {
	tests := []struct {
		name                                     string
		st                                       State
		exists, failed, gone, stopped, autoStart bool
	}{
		{name: "not loaded", st: NotFound("a.service"), gone: true, stopped: true},
		{name: "zero", st: State{}, gone: true, stopped: true},
		{name: "running", st: State{LoadState: "loaded", ActiveState: StateActive, SubState: "running"}, exists: true},
		{name: "inactive", st: State{LoadState: "loaded", ActiveState: StateInactive, SubState: SubDead}, exists: true, gone: true, stopped: true},
		{name: "failed", st: State{LoadState: "loaded", ActiveState: StateFailed, SubState: "failed"}, exists: true, failed: true, stopped: true},
		{name: "waiting to restart", st: State{LoadState: "loaded", ActiveState: StateActivating, SubState: SubAutoRestart}, exists: true, autoStart: true},
		{name: "starting", st: State{LoadState: "loaded", ActiveState: StateActivating, SubState: "start"}, exists: true},
		{name: "stopping", st: State{LoadState: "loaded", ActiveState: StateDeactivating, SubState: "stop-sigterm"}, exists: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []bool{tt.st.Exists(), tt.st.Failed(), tt.st.Gone(), tt.st.Stopped(), tt.st.AutoRestart()}
			want := []bool{tt.exists, tt.failed, tt.gone, tt.stopped, tt.autoStart}
			names := []string{"Exists", "Failed", "Gone", "Stopped", "AutoRestart"}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s.%s() = %v; want %v", tt.st, names[i], got[i], want[i])
				}
			}
		})
	}
}
