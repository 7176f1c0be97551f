package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/legion-dev/legion/dashboard/webtest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// startWebUnit makes legion-web.socket start legion-web.service with one
// request (over TCP, or over the unix socket when unix is set), checks
// the answer, and returns the service's main PID.
func startWebUnit(t testing.TB, f *webtest.Fixture, unix bool, hdr map[string]string, wantCode int) uint32 {
	t.Helper()
	client := http.DefaultClient
	url := fmt.Sprintf("http://127.0.0.1:%d/api/whoami", f.WebPort)
	if unix {
		sock := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), units.WebSocketPath)
		client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
		url = "http://localhost/api/whoami"
	}
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s through legion-web.socket: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != wantCode {
		t.Fatalf("GET %s through legion-web.socket = %d %s; want %d", url, resp.StatusCode, body, wantCode)
	}
	var pid uint32
	waitfor.Check(t, webtest.WaitFor, unitname.WebUnit+" active", func() error {
		st, err := f.Manager.State(t.Context(), unitname.WebUnit)
		if err != nil {
			return err
		}
		pid = st.MainPID
		if st.ActiveState != "active" || pid == 0 {
			return fmt.Errorf("%s/%s pid %d", st.ActiveState, st.SubState, pid)
		}
		return nil
	})
	return pid
}

// rssKB is the resident set size of pid in KiB (VmRSS).
func rssKB(t testing.TB, pid uint32) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestWebUnit: the installed units as a person uses them. A request to the
// TCP address starts legion-web.service (hardened, under the real
// manager), which refuses it without the token and answers with it; the
// unix socket answers the same; with no page connected the service exits
// after web.idle_exit and the socket starts it again on the next request.
func TestWebUnit(t *testing.T) {
	f := webtest.Start(t, webtest.Options{})
	pid := startWebUnit(t, f, false, nil, http.StatusUnauthorized)
	startWebUnit(t, f, false, map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized)
	startWebUnit(t, f, false, map[string]string{"Authorization": "Bearer " + f.Token}, http.StatusOK)
	startWebUnit(t, f, true, map[string]string{"Authorization": "Bearer " + f.Token}, http.StatusOK)
	t.Logf("%s runs as pid %d, RSS %d KiB", unitname.WebUnit, pid, rssKB(t, pid))

	waitfor.Check(t, webtest.WaitFor, unitname.WebUnit+" gone idle (web.idle_exit 3s)", func() error {
		st, err := f.Manager.State(t.Context(), unitname.WebUnit)
		if err != nil {
			return err
		}
		if st.ActiveState != "inactive" {
			return fmt.Errorf("%s/%s result %s", st.ActiveState, st.SubState, st.Result)
		}
		if st.Result != "success" {
			return fmt.Errorf("inactive with result %s; want success", st.Result)
		}
		return nil
	})
	if again := startWebUnit(t, f, false, nil, http.StatusUnauthorized); again == pid {
		t.Errorf("after its idle exit %s runs as the same pid %d", unitname.WebUnit, pid)
	}
}
