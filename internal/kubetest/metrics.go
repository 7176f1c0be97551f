package kubetest

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Requests are counts of requests the API server served, keyed
// "VERB resource" (with "/subresource" when there is one), as its
// apiserver_request_total counter has them: every response code summed.
type Requests map[string]float64

// Sub is r minus before, key by key, without the keys left at zero.
func (r Requests) Sub(before Requests) Requests {
	out := Requests{}
	for k, v := range r {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Only is the part of r whose resource is one of resources (the part of
// a key after the verb, before any "/subresource").
func (r Requests) Only(resources ...string) Requests {
	out := Requests{}
	for k, v := range r {
		_, res, _ := strings.Cut(k, " ")
		res, _, _ = strings.Cut(res, "/")
		if slices.Contains(resources, res) {
			out[k] = v
		}
	}
	return out
}

// Total is the sum of r's counts.
func (r Requests) Total() float64 {
	var n float64
	for _, v := range r {
		n += v
	}
	return n
}

// String lists r's counts in key order.
func (r Requests) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(r)) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %g", k, r[k])
	}
	return b.String()
}

// Requests reads the API server's /metrics through the admin's client
// and returns its apiserver_request_total by verb and resource, less
// long-running requests (verbs WATCH and CONNECT: a watch is counted when
// it ends, an exec or a port-forward when it closes) and requests for no
// resource (/metrics itself, /readyz, discovery). The read itself is one
// request for no resource, so it counts nowhere.
func (c *Cluster) Requests(t testing.TB) Requests {
	t.Helper()
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("read the API server's /metrics: %v", err)
	}
	r, err := ParseRequests(body)
	if err != nil {
		t.Fatalf("the API server's /metrics: %v", err)
	}
	return r
}

// ParseRequests reads apiserver_request_total from text in Prometheus's
// text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/), as
// Cluster.Requests returns it. A sample line of that metric that does not
// parse is an error naming the line.
func ParseRequests(text []byte) (Requests, error) {
	const metric = "apiserver_request_total"
	out := Requests{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		rest, ok := strings.CutPrefix(l, metric)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue // another metric, a comment, a blank line
		}
		labels, value, err := parseSample(rest)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", line, l, err)
		}
		verb, res := labels["verb"], labels["resource"]
		if res == "" || verb == "WATCH" || verb == "CONNECT" {
			continue
		}
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[verb+" "+res] += value
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseSample parses what follows a sample's metric name: its optional
// {label="value",...} and its value (a timestamp after it is ignored).
func parseSample(s string) (map[string]string, float64, error) {
	labels := map[string]string{}
	if strings.HasPrefix(s, "{") {
		s = s[1:]
		for {
			s = strings.TrimLeft(s, " ,")
			if strings.HasPrefix(s, "}") {
				s = s[1:]
				break
			}
			name, rest, ok := strings.Cut(s, "=")
			if !ok || name == "" || strings.ContainsAny(name, " {}\"") {
				return nil, 0, fmt.Errorf("want label=\"value\" at %q", s)
			}
			if !strings.HasPrefix(rest, `"`) {
				return nil, 0, fmt.Errorf("label %s: want a quoted value at %q", name, rest)
			}
			var v strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[i]) // \\ and \"
					}
					continue
				}
				v.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return nil, 0, fmt.Errorf("label %s: unterminated value", name)
			}
			labels[name] = v.String()
			s = rest[i+1:]
		}
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, 0, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return nil, 0, fmt.Errorf("value: %w", err)
	}
	return labels, v, nil
}
