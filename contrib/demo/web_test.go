package demo_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/units/sdtest"
)

// loginURL is the dashboard line `legion demo --web` prints.
var loginURL = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/login#t=([A-Za-z0-9_-]+)`)

// TestDemoWeb runs `legion demo --web` on a private manager: it prints the
// dashboard's login URL before the issues move, the dashboard answers
// with the demo team's board (the token from the URL's fragment), and the
// demo still takes every issue to Done.
func TestDemoWeb(t *testing.T) {
	sdtest.Require(t, "root (the demo starts a private systemd manager)", os.Geteuid() == 0)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--no-tty", "--timeout", "3m", "--sandbox", "--web")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	cmd.Stderr = cmd.Stdout
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	checked := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line + "\n")
		m := loginURL.FindStringSubmatch(line)
		if m == nil || checked {
			continue
		}
		checked = true
		base, _, _ := strings.Cut(m[0], "/login#")
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/board?team=demo", nil)
		req.Header.Set("Authorization", "Bearer "+m[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("GET the demo's board: %v", err)
			continue
		}
		var b struct {
			Team    string `json:"team"`
			Columns []struct {
				Issues []struct{ ID string } `json:"issues"`
			} `json:"columns"`
		}
		err = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		n := 0
		for _, c := range b.Columns {
			n += len(c.Issues)
		}
		if err != nil || resp.StatusCode != 200 || b.Team != "demo" || n != 3 {
			t.Errorf("GET the demo's board = %d, team %q with %d issues (%v); want 200, team demo, 3 issues", resp.StatusCode, b.Team, n, err)
		}
	}
	err = cmd.Wait()
	t.Logf("legion demo --web output:\n%s", all.String())
	if err != nil {
		t.Fatalf("legion demo --web: %v", err)
	}
	if !checked {
		t.Errorf("legion demo --web printed no login URL")
	}
	if !strings.Contains(all.String(), "all 3 issues are Done") {
		t.Errorf("demo output lacks %q", "all 3 issues are Done")
	}
}
