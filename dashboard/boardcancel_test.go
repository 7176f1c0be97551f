package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/linear/lineartest"
	"github.com/legion-dev/legion/dashboard"
	"github.com/legion-dev/legion/internal/waitfor"
)

// TestBoardReadGivenUp: a board read that its client gave up on (a GET
// whose client went away while the tracker was slow) is not the board's
// state: the next GET reads the tracker again and shows its issues.
// Before, the cancelled read's "context canceled" was kept as the board,
// with no issues, and never read again while no page was connected.
func TestBoardReadGivenUp(t *testing.T) {
	srv, hs := linearBoard(t)
	ts := hs.URL
	get := func(ctx context.Context) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts+"/api/board?team=demo", nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	srv.Stall(false)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, _, err := get(ctx); done <- err }()
	waitfor.True(t, 30*time.Second, "the board's tracker read to reach Linear", func() bool { return srv.Calls("LegionIssues") > 0 })
	cancel()
	<-done
	code, body, err := get(t.Context())
	if err != nil || code != http.StatusOK || !strings.Contains(body, "ENG-1") || strings.Contains(body, "context canceled") {
		t.Errorf("GET /api/board after a given-up read = %d %s, %v; want 200 with ENG-1", code, body, err)
	}
}

// TestBoardReadFailedReadsAgain: a board whose last read failed (Linear
// answering 502 past the client's retries) is read again by the next GET,
// which shows the issues once the tracker answers. Before, the failure
// was served for good while no page was connected.
func TestBoardReadFailedReadsAgain(t *testing.T) {
	srv, hs := linearBoard(t)
	get := func() string {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, hs.URL+"/api/board?team=demo", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for range 5 { // the Linear client's attempts (linear.Retry's default)
		srv.Inject(lineartest.Reply{Status: 502, Body: "<html>502 Bad Gateway</html>", Header: map[string][]string{"Content-Type": {"text/html"}}})
	}
	if b := get(); !strings.Contains(b, "502") {
		t.Fatalf("GET /api/board with Linear answering 502 = %s; want the failure shown", b)
	}
	if b := get(); !strings.Contains(b, "ENG-1") {
		t.Errorf("GET /api/board once Linear answers = %s; want ENG-1", b)
	}
}

// linearBoard is a dashboard of team demo on the Linear fake (one issue
// in Todo), served over HTTP.
func linearBoard(t *testing.T) (*lineartest.Server, *httptest.Server) {
	t.Helper()
	const key = "lin_api_BOARD0123456789"
	srv := lineartest.NewServer(t, key, "ENG")
	srv.AddIssue("First", "Todo")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "linear-key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "legion.toml")
	toml := fmt.Sprintf("[teams.demo]\nid = \"6f1c2b9e-0000-4000-8000-000000000001\"\nworkspace = %q\ntracker = \"linear\"\nlinear.team_key = \"ENG\"\nlinear.credentials_file = %q\nlinear.api_url = %q\n", dir, keyFile, srv.URL)
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := dashboard.New(dashboard.Options{Token: testToken, ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return srv, hs
}
