package controller_test

import (
	"fmt"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/github/githubtest"
	"github.com/legion-dev/legion/controller/linear"
	"github.com/legion-dev/legion/controller/linear/lineartest"
)

// ticksPerHour is an hour of the controller's default interval
// (service.DefaultInterval, 10 s) with no unit event in between.
const ticksPerHour = 360

// BenchmarkTrackerBudget: what an hour of ticks costs a team of 200
// issues of the tracker's API budget, counted by the local fakes (GitHub's
// points by its documented formula, githubtest.Cost), for a board where
// nothing changes and for one where 10 issues change every tick:
//
//   - github/idle: the conditional REST probes answer 304 (free), so
//     no GraphQL query is sent after the first tick;
//   - github/moving: 10 issues get a comment each tick, so every tick
//     reads the whole board (4 pages of 50 issues);
//   - linear/idle: Linear has no conditional requests: every tick reads
//     every page.
//
// The metrics are per hour, and as a percentage of the budget: GitHub's
// 5,000 GraphQL points and 5,000 REST requests an hour, and Linear's
// 1,500 requests an hour for an API key (the lower of the figures Linear
// has published). github/moving is the baseline github/idle is read
// against (the ratio idle/moving is what the probes save).
func BenchmarkTrackerBudget(b *testing.B) {
	b.Run("github/idle", func(b *testing.B) { benchGitHub(b, 0) })
	b.Run("github/moving", func(b *testing.B) { benchGitHub(b, 10) })
	b.Run("linear/idle", benchLinear)
}

func benchGitHub(b *testing.B, moving int) {
	srv := githubtest.NewServer(b, "ghp_bench", "acme", "web")
	b.Setenv("LEGION_BENCH_GH_TOKEN", "ghp_bench")
	c, err := github.New(github.Options{Owner: "acme", Repo: "web", TokenEnv: "LEGION_BENCH_GH_TOKEN", Endpoint: srv.URL + "/graphql"})
	if err != nil {
		b.Fatal(err)
	}
	tr, err := c.Tracker(github.TrackerOptions{Prefix: "WEB"})
	if err != nil {
		b.Fatal(err)
	}
	var numbers []int
	for i := range 200 {
		numbers = append(numbers, srv.AddIssue(fmt.Sprintf("issue %d", i), "legion", "legion:in-progress"))
	}
	src := controller.Sources{Tracker: tr, Reviews: c}
	var points, queries, rest int
	for b.Loop() {
		p0, q0 := srv.PointsUsed(), srv.Calls("")
		ok0, _ := srv.RESTCalls()
		for tick := range ticksPerHour {
			for i := range moving {
				srv.Comment(numbers[(tick*moving+i)%len(numbers)], "ana", "OWNER", "a note")
			}
			if _, _, err := controller.Collect(b.Context(), src); err != nil {
				b.Fatal(err)
			}
		}
		ok, _ := srv.RESTCalls()
		points, queries, rest = srv.PointsUsed()-p0, srv.Calls("")-q0, ok-ok0
	}
	b.ReportMetric(float64(points), "points/h")
	b.ReportMetric(100*float64(points)/githubtest.PointsPerHour, "%points")
	b.ReportMetric(float64(queries), "graphql/h")
	b.ReportMetric(float64(rest), "rest-counted/h")
}

func benchLinear(b *testing.B) {
	srv := lineartest.NewServer(b, "lin_api_bench", "ENG")
	b.Setenv("LEGION_BENCH_LINEAR_KEY", "lin_api_bench")
	c, err := linear.New(linear.Options{Team: "ENG", APIKeyEnv: "LEGION_BENCH_LINEAR_KEY", Endpoint: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		srv.AddIssue(fmt.Sprintf("issue %d", i), "In Progress")
	}
	src := controller.Sources{Tracker: c}
	var requests int
	for b.Loop() {
		r0 := srv.Calls("")
		for range ticksPerHour {
			if _, _, err := controller.Collect(b.Context(), src); err != nil {
				b.Fatal(err)
			}
		}
		requests = srv.Calls("") - r0
	}
	b.ReportMetric(float64(requests), "requests/h")
	b.ReportMetric(100*float64(requests)/1500, "%requests")
}
