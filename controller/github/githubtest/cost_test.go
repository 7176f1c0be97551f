package githubtest

import "testing"

// TestCost: GitHub's documented examples of its formula.
func TestCost(t *testing.T) {
	for _, c := range []struct {
		query string
		want  int
	}{
		// docs.github.com, "Rate limits and query limits for the GraphQL
		// API": 50 repositories with 20 issues and 100 pull requests with
		// 10 labels each is 1 + 50 + 50 + 5,000... their first example:
		// viewer repositories(first: 100) issues(first: 50) labels(first: 60)
		// is 1 + 100 + 5,000 = 5,101 requests: 51 points.
		{`query { viewer { login repositories(first: 100) { edges { node { name issues(first: 50) { edges { node { title labels(first: 60) { edges { node { name } } } } } } } } } } }`, 51},
		{`query { viewer { login } }`, 1},
		{`query Q { repository(owner: "o", name: "r") { issues(first: 50) { nodes { ...f } } } } fragment f on Issue { labels(first: 50) { nodes { name } } comments(last: 50) { nodes { body } } }`, 1},
		{`query Q { repository(owner: "o", name: "r") { issues(first: 100) { nodes { labels(first: 10) { nodes { name } } comments(last: 10) { nodes { body } } } } } }`, 2},
	} {
		if got := Cost(c.query); got != c.want {
			t.Errorf("Cost(%.60q...) = %d; want %d", c.query, got, c.want)
		}
	}
}

// TestCostArgumentsWithBraces: an argument holding an input object
// (orderBy: {…}) is not a selection.
func TestCostArgumentsWithBraces(t *testing.T) {
	q := `query { repository(owner: "o", name: "r") { issues(first: 50, orderBy: {field: CREATED_AT, direction: ASC}) { nodes { labels(first: 50) { nodes { name } } comments(last: 50) { nodes { body } } x: labels(first: 5) { nodes { name } } } } } }`
	if got := Cost(q); got != 2 { // 1 + 3 × 50 = 151 requests
		t.Errorf("Cost = %d; want 2", got)
	}
}
