// Package gqltest is what the tests' fake GraphQL services (lineartest,
// githubtest) share: decoding a request as the real services do, and a
// Recorder that counts requests, keeps their variables and plays canned
// replies, so tests can see what the real client sent and make it meet
// failures.
package gqltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Reply is a canned answer.
type Reply struct {
	Status int
	Header http.Header
	Body   string
}

// Request is one GraphQL request.
type Request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// Decode reads a request body; fields other than a request's are an error.
func Decode(body io.Reader) (*Request, error) {
	var req Request
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

// Recorder counts requests by operation, keeps each operation's latest
// variables, calls a hook and plays injected replies. Its zero value is
// ready; it is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	calls  map[string]int
	total  int
	last   map[string]map[string]any
	script []Reply
	onCall func(op string, total int)
}

// Inject makes the next len(r) requests get r, in order, whatever they ask.
func (rec *Recorder) Inject(r ...Reply) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.script = append(rec.script, r...)
}

// OnCall sets a hook called after each request is counted, with its
// operation name and the running total.
func (rec *Recorder) OnCall(f func(op string, total int)) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.onCall = f
}

// Calls returns the number of requests for operation op ("" for all).
func (rec *Recorder) Calls(op string) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if op == "" {
		return rec.total
	}
	return rec.calls[op]
}

// Pending returns the number of injected replies not played yet.
func (rec *Recorder) Pending() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.script)
}

// LastVariables returns the variables of op's latest request.
func (rec *Recorder) LastVariables(op string) map[string]any {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.last[op]
}

// Record counts req and calls the hook; when a canned reply is due it
// writes it to w and returns true: the request is answered.
func (rec *Recorder) Record(w http.ResponseWriter, req *Request) bool {
	rec.mu.Lock()
	if rec.calls == nil {
		rec.calls, rec.last = map[string]int{}, map[string]map[string]any{}
	}
	op := req.OperationName
	rec.calls[op]++
	rec.total++
	rec.last[op] = req.Variables
	total, hook := rec.total, rec.onCall
	var canned *Reply
	if len(rec.script) > 0 {
		canned = &rec.script[0]
		rec.script = rec.script[1:]
	}
	rec.mu.Unlock()
	if hook != nil {
		hook(op, total)
	}
	if canned == nil {
		return false
	}
	for k, v := range canned.Header {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(canned.Status)
	fmt.Fprint(w, canned.Body)
	return true
}
