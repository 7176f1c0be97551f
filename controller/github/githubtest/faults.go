package githubtest

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Faults: besides canned replies (Inject), the fake can answer the next
// requests as GitHub does when it fails (ServerError) or rate-limits
// (RateLimitReply), carry out the next writes and lose their answers
// (LoseAnswers), or hold the next request until the client gives up
// (Stall). They apply to GraphQL requests, where every write Legion makes
// goes; the REST lists (conditional GETs) and git are served as usual.
// Writes is the log of the mutations that took effect.

// Write is a mutation that took effect on the fake.
type Write struct {
	Op        string         // the operation name, e.g. LegionComment
	Variables map[string]any // as the client sent them
	// Lost: the write took effect but its answer was never sent (the
	// connection was closed instead; see LoseAnswers and Stall).
	Lost bool
}

// ServerError is GitHub's answer when it fails: status 502 (its HTML
// "Unicorn!" page from the front end) or 503 and any other status (JSON
// with a message). Inject it to make the next request fail so.
func ServerError(status int) Reply {
	if status == http.StatusBadGateway {
		return Reply{Status: status, Header: http.Header{"Content-Type": {"text/html"}},
			Body: "<html><body><h1>502 Bad Gateway</h1>Unicorn! &middot; GitHub</body></html>"}
	}
	return Reply{Status: status, Body: fmt.Sprintf(`{"message":%q,"documentation_url":"https://docs.github.com/graphql"}`, http.StatusText(status))}
}

// RateLimitReply is GitHub's refusal of a request over a rate limit, as
// its documentation describes it ("Rate limits for the REST API", which
// the GraphQL API shares: https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api):
// status 403 or 429 with the x-ratelimit-* headers. The primary limit
// (secondary false) says x-ratelimit-remaining 0 and when it resets,
// wait from now; a secondary limit says so in its message, with
// retry-after wait in seconds, while the primary budget has requests
// left.
func RateLimitReply(status int, secondary bool, wait time.Duration, now time.Time) Reply {
	at := now.Add(wait)
	reset := at.Unix()
	if at.After(time.Unix(reset, 0)) {
		reset++ // rounded up: the reset is never before the wait is over
	}
	h := http.Header{
		"X-Ratelimit-Limit":    {strconv.Itoa(PointsPerHour)},
		"X-Ratelimit-Resource": {"graphql"},
		"X-Ratelimit-Reset":    {strconv.FormatInt(reset, 10)},
	}
	if secondary {
		h.Set("X-Ratelimit-Remaining", "4321")
		h.Set("X-Ratelimit-Used", strconv.Itoa(PointsPerHour-4321))
		h.Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		return Reply{Status: status, Header: h,
			Body: `{"documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000."}`}
	}
	h.Set("X-Ratelimit-Remaining", "0")
	h.Set("X-Ratelimit-Used", strconv.Itoa(PointsPerHour))
	return Reply{Status: status, Header: h,
		Body: `{"documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits","message":"API rate limit exceeded for user ID 1."}`}
}

// LoseAnswers makes the next n mutations that succeed take effect and then
// lose their answer: the connection is closed before any response is
// written, as when the network or a proxy drops it after GitHub
// committed. The client sees a transport error and cannot know the write
// happened. Queries and failed mutations are answered as usual.
func (s *Server) LoseAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose += n
}

// Stall makes the next GraphQL request (any operation) hang without an
// answer until the client gives up on it (its timeout, or its context,
// closes the connection). If carryOut, the fake carries it out first, as
// a server that committed and then stalled on the answer: a mutation
// takes effect, logged in Writes as Lost, since its answer reaches no
// one; otherwise the request is never carried out. Stall does not wait
// for the request.
func (s *Server) Stall(carryOut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = append(s.stalls, carryOut)
}

// Writes returns the mutations that took effect so far, in order.
func (s *Server) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// Pending returns the faults not met yet: injected replies not played,
// stalls and lost answers still to come.
func (s *Server) Pending() (replies, stalls, lose int) {
	replies = s.Recorder.Pending()
	s.mu.Lock()
	defer s.mu.Unlock()
	return replies, len(s.stalls), s.lose
}

// takeStall takes the next stall, if one is due: whether there is, and
// whether to carry the request out.
func (s *Server) takeStall() (stalled, carryOut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stalls) == 0 {
		return false, false
	}
	carryOut, s.stalls = s.stalls[0], s.stalls[1:]
	return true, carryOut
}

// logWrite logs a mutation that took effect and reports whether its
// answer is lost (stalled, or LoseAnswers). Called with mu held.
func (s *Server) logWrite(op string, v map[string]any, stalled bool) bool {
	lost := stalled
	if !lost && s.lose > 0 {
		lost = true
		s.lose--
	}
	s.writes = append(s.writes, Write{Op: op, Variables: v, Lost: lost})
	return lost
}

// dropConnection closes the request's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// No connection to take over (HTTP/2): abort the handler, which
		// resets the stream without a response.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
