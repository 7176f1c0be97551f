package githubtest

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// connectionRE finds a connection's page size: `(first: N` or `(last: N`,
// or the same with other arguments before it.
var connectionRE = regexp.MustCompile(`^\([^()]*?\b(?:first|last): (\d+)`)

// Cost is what GitHub charges a query against its GraphQL rate limit, by
// its documented formula: every connection needs one request for each
// node its parents' connections may return (their first: or last:
// multiplied down the nesting), the requests are summed, divided by 100
// and rounded to the nearest whole number, and a query costs at least 1.
// Mutations cost 1.
func Cost(query string) int {
	query = inline(query)
	var stack []int // the page size of each open connection's selection, by brace depth
	var pending int // the page size of a connection whose selection opens next
	depth := 0
	sizes := map[int]int{} // brace depth → page size of the connection opened there
	requests := 0
	for i := 0; i < len(query); i++ {
		switch query[i] {
		case '(':
			end := strings.IndexByte(query[i:], ')') // arguments hold no parentheses, but may hold braces
			if end < 0 {
				end = len(query) - i - 1
			}
			if m := connectionRE.FindStringSubmatch(query[i : i+end+1]); m != nil {
				n, _ := strconv.Atoi(m[1])
				parents := 1
				for _, s := range stack {
					parents *= s
				}
				requests += parents
				pending = n
			}
			i += end // past the arguments
		case '{':
			depth++
			if pending > 0 {
				sizes[depth] = pending
				stack = append(stack, pending)
				pending = 0
			}
		case '}':
			if _, ok := sizes[depth]; ok {
				delete(sizes, depth)
				stack = stack[:len(stack)-1]
			}
			depth--
		}
	}
	return max(1, int(math.Round(float64(requests)/100)))
}

var fragmentRE = regexp.MustCompile(`fragment (\w+) on \w+ \{`)

// inline replaces each fragment spread (...name) with the fragment's
// selections and drops the fragments' definitions.
func inline(query string) string {
	bodies := map[string]string{}
	for {
		m := fragmentRE.FindStringSubmatchIndex(query)
		if m == nil {
			break
		}
		open := m[1] - 1
		end := matching(query, open)
		if end < 0 {
			break
		}
		bodies[query[m[2]:m[3]]] = query[open+1 : end]
		query = query[:m[0]] + query[end+1:]
	}
	for range 5 { // fragments may spread fragments
		for name, body := range bodies {
			query = regexp.MustCompile(`\.\.\.`+regexp.QuoteMeta(name)+`\b`).ReplaceAllLiteralString(query, body)
		}
	}
	return query
}

// matching is the index of the brace closing the one at open, or -1.
func matching(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}
