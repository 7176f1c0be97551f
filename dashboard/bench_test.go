package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/dashboard/webtest"
	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/unitname"
)

// benchSessions is how many live sessions the board shows in the bench.
const benchSessions = 100

// BenchmarkBoard: the board of a team with 100 live sessions (scripted
// agents idle at their prompt) in a real Chromium. It reports
//   - the time from navigation to the board's data on screen, against an
//     empty page's first contentful paint from a server in this process;
//   - a session change's latency from the helper's event to the page's
//     handler, against a `legion sessions list` (the CLI's whole round
//     trip to the helper);
//   - the resident memory of the socket-activated legion-web.service just
//     started (idle, no page), against the helper's with the 100 sessions.
func BenchmarkBoard(b *testing.B) {
	titles := make([]string, benchSessions)
	for i := range titles {
		titles[i] = fmt.Sprintf("Bench issue %d", i+1)
	}
	f := webtest.Start(b, webtest.Options{Script: "say Working on $LEGION_ISSUE\n", Issues: titles})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cfg, err := config.Load(f.ConfigPath)
	if err != nil {
		b.Fatal(err)
	}
	c, err := api.Dial(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var names []string
	{
		// One at a time: each adds a git worktree, and git locks the
		// repository for that.
		var g errgroup.Group
		g.SetLimit(1)
		res := make([]string, len(f.Issues))
		for i, id := range f.Issues {
			g.Go(func() error {
				c, err := api.Dial(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				r, err := service.Dispatch(ctx, c, f.Team, cfg.Worker, id, controller.ModePlan)
				res[i] = r.Name
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatalf("dispatch %d sessions: %v", benchSessions, err)
		}
		names = res
	}
	waitfor.Check(b, 10*time.Minute, fmt.Sprintf("%d sessions running", benchSessions), func() error {
		l, err := c.List(ctx)
		if err != nil {
			return err
		}
		n := 0
		for _, s := range l.Sessions {
			if s.State == api.StateRunning && s.Agent != nil && s.Agent.State == api.AgentIdle {
				n++
			}
		}
		if n < benchSessions {
			return fmt.Errorf("%d of %d running and idle", n, benchSessions)
		}
		return nil
	})

	br := webtest.NewBrowser(b)
	br.Navigate(f.LoginURL())
	br.WaitJS("the board with every session", fmt.Sprintf(`document.querySelectorAll('.card .session-line').length === %d`, benchSessions))

	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>empty</title><p>empty</p>"))
	}))
	defer empty.Close()

	const rounds = 5
	var board, blank []time.Duration
	b.ResetTimer()
	for range b.N * rounds {
		br.Navigate("about:blank")
		br.Navigate(empty.URL)
		br.WaitJS("the empty page painted", `performance.getEntriesByName("first-contentful-paint").length > 0`)
		var ms float64
		if err := br.Eval(`performance.getEntriesByName("first-contentful-paint")[0].startTime`, &ms); err != nil {
			b.Fatal(err)
		}
		blank = append(blank, time.Duration(ms*float64(time.Millisecond)))

		br.Navigate("about:blank")
		br.Navigate(f.URL + "/#board")
		br.WaitJS("the board painted", `document.querySelector("#view > .view-body").dataset.painted`)
		if err := br.Eval(`Number(document.querySelector("#view > .view-body").dataset.painted)`, &ms); err != nil {
			b.Fatal(err)
		}
		var cards int
		if err := br.Eval(`document.querySelectorAll('.card .session-line').length`, &cards); err != nil || cards != benchSessions {
			b.Fatalf("the painted board shows %d sessions (%v); want %d", cards, err, benchSessions)
		}
		board = append(board, time.Duration(ms*float64(time.Millisecond)))
	}
	b.StopTimer()
	benchreport.Vs(b, board, "board-paint-ms", blank, "empty-paint-ms", "paint/empty")

	// Event → page: each kill is a session change; the page records when
	// its handler got each one.
	br.WaitJS("the event socket open", `document.body.dataset.events === "open"`)
	if err := br.Eval(`(window.__lat = {}, Legion.onEvent((ev) => {
		if (ev.type === "session" && !(ev.session.name in window.__lat)) window.__lat[ev.session.name] = Date.now() - Date.parse(ev.time);
	}), true)`, nil); err != nil {
		b.Fatal(err)
	}
	var events, lists []time.Duration
	for _, name := range names[:rounds*2] {
		if _, err := c.Kill(ctx, name); err != nil {
			b.Fatalf("kill %s: %v", name, err)
		}
		br.WaitJS("the change of "+name+" on the page", fmt.Sprintf(`%q in window.__lat`, name))
		var ms float64
		if err := br.Eval(fmt.Sprintf(`window.__lat[%q]`, name), &ms); err != nil {
			b.Fatal(err)
		}
		events = append(events, time.Duration(ms*float64(time.Millisecond)))
		t0 := time.Now()
		if out, err := exec.CommandContext(ctx, f.Bin, "sessions", "list").CombinedOutput(); err != nil {
			b.Fatalf("legion sessions list: %v\n%s", err, out)
		}
		lists = append(lists, time.Since(t0))
	}
	// Date.now() has millisecond resolution: a latency under 1 ms reads 0.
	benchreport.Vs(b, events, "event-ms", lists, "sessions-list-ms", "event/list")

	// Idle memory of the real unit, started by its socket.
	pid := startWebUnit(b, f, false, nil, http.StatusUnauthorized)
	web := rssKB(b, pid)
	st, err := f.Manager.State(ctx, unitname.HelperUnit)
	if err != nil || st.MainPID == 0 {
		b.Fatalf("%s: %+v, %v; want it running", unitname.HelperUnit, st, err)
	}
	helper := rssKB(b, st.MainPID)
	b.ReportMetric(float64(web)/1024, "web-rss-MiB")
	b.ReportMetric(float64(helper)/1024, "helper-rss-MiB")
	b.ReportMetric(float64(web)/float64(helper), "web/helper-rss")
}
