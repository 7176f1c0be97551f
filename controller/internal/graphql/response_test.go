package graphql

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	html := http.Header{"Content-Type": {"text/html"}}
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		body   string

		wantData      string        // success: the data
		wantTransient string        // a *Transient with this error text
		wantRateLimit bool          // ... that is a rate limit
		wantWait      time.Duration // ... asking for this wait
		wantIs        error         // an error wrapping this
		wantCode      string        // a *testAPIError with this code
		wantErr       string        // an error containing this
	}{
		{name: "data", status: 200, body: `{"data":{"x":1}}`, wantData: `{"x":1}`},
		{name: "data and a non-string message", status: 200, body: `{"data":{"x":1},"message":5}`, wantData: `{"x":1}`},
		{name: "errors beside data", status: 200, body: `{"data":{"x":null},"errors":[{"message":"no x","extensions":{"code":"NOT_FOUND"}},{"message":"again"}]}`,
			wantCode: "NOT_FOUND", wantErr: "no x; again"},
		{name: "errors with HTTP 400", status: 400, body: `{"errors":[{"message":"bad","extensions":{"code":"INVALID"}}]}`, wantCode: "INVALID"},
		{name: "auth", status: 401, body: `{"message":"Bad credentials"}`, wantIs: ErrAuth, wantErr: "authentication failed (Bad credentials)"},
		{name: "auth, not JSON", status: 401, body: `nope`, wantIs: ErrAuth},
		{name: "rate limit", status: 429, header: http.Header{"Retry-After": {"7"}}, body: `{}`,
			wantTransient: "HTTP 429", wantRateLimit: true, wantWait: 7 * time.Second},
		{name: "rate limit code", status: 200, body: `{"errors":[{"message":"slow","extensions":{"code":"SLOW_DOWN"}}]}`,
			wantTransient: "HTTP 200, SLOW_DOWN", wantRateLimit: true},
		{name: "server error", status: 503, header: html, body: "<html>down</html>", wantTransient: `server error: HTTP 503: "<html>down</html>"`},
		{name: "server error, empty", status: 500, wantTransient: "server error: HTTP 500"},
		{name: "HTML", status: 200, header: html, body: "<html>", wantIs: ErrMalformed,
			wantErr: "test: Op: malformed response: want a JSON object {data, errors}, got invalid JSON at byte 1 (HTTP 200, Content-Type text/html)"},
		{name: "wrong type", status: 200, body: `{"errors":"many"}`, wantIs: ErrMalformed, wantErr: "JSON string where errors belongs"},
		{name: "not JSON, not 2xx", status: 404, header: html, body: "<html>not here</html>", wantErr: `test: Op: HTTP 404: "<html>not here</html>"`},
		{name: "JSON, not 2xx", status: 400, body: `{}`, wantErr: `test: Op: HTTP 400: "{}"`},
		{name: "no data", status: 200, body: `{}`, wantIs: ErrMalformed, wantErr: "no data and no errors"},
		{name: "null data", status: 200, body: `{"data":null}`, wantIs: ErrMalformed, wantErr: "no data and no errors"},
		{name: "too large", status: 200, body: `{"data":"` + strings.Repeat("x", maxBody) + `"}`, wantIs: ErrMalformed, wantErr: "body larger than"},
		{name: "long body cut", status: 418, body: strings.Repeat("y", 300), wantErr: `HTTP 418: "` + strings.Repeat("y", 200) + `…"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			data, tr, err := testService.Parse("Op", tc.status, h, []byte(tc.body), now)
			switch {
			case tc.wantData != "":
				if err != nil || tr != nil || string(data) != tc.wantData {
					t.Fatalf("Parse() = %s, %+v, %v; want data %s", data, tr, err, tc.wantData)
				}
				return
			case tc.wantTransient != "":
				if err != nil || data != nil || tr == nil {
					t.Fatalf("Parse() = %s, %+v, %v; want a transient failure", data, tr, err)
				}
				if tr.Err.Error() != tc.wantTransient || tr.RateLimited != tc.wantRateLimit || tr.Wait != tc.wantWait {
					t.Errorf("Parse() transient = {%v %v %v}; want {%s %v %v}", tr.Err, tr.RateLimited, tr.Wait, tc.wantTransient, tc.wantRateLimit, tc.wantWait)
				}
				return
			}
			if err == nil || data != nil || tr != nil {
				t.Fatalf("Parse() = %s, %+v, %v; want an error", data, tr, err)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Parse() error = %v; want %v", err, tc.wantIs)
			}
			if tc.wantCode != "" && !isAPIError(err, tc.wantCode) {
				t.Errorf("Parse() error = %v; want the service's API error %s", err, tc.wantCode)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse() error = %q; want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestParseWithoutClassify: a service without signals of its own still
// retries server errors, and reads 401 and 429 as plain HTTP errors.
func TestParseWithoutClassify(t *testing.T) {
	plain := &Service[testError]{Prefix: "plain", APIError: testService.APIError}
	for _, tc := range []struct {
		status        int
		wantTransient bool
	}{
		{401, false}, {429, false}, {502, true},
	} {
		_, tr, err := plain.Parse("Op", tc.status, http.Header{}, []byte(`{}`), time.Now())
		if (tr != nil) != tc.wantTransient || (err != nil) == tc.wantTransient {
			t.Errorf("Parse(HTTP %d) = %+v, %v; want transient %v", tc.status, tr, err, tc.wantTransient)
		}
		if errors.Is(err, ErrAuth) {
			t.Errorf("Parse(HTTP %d) error = %v; want no ErrAuth without Classify", tc.status, err)
		}
	}
}

func TestJSONProblem(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{`{"a":`, "invalid JSON at byte 5"},
		{`{"a" 1}`, "invalid JSON at byte 6"},
		{`{"a":"x"}`, "JSON string where A belongs"},
		{`{"b":{"c":[1,"x"]}}`, "JSON string where B.C belongs"},
	} {
		var v struct {
			A int
			B struct{ C []int }
		}
		err := json.Unmarshal([]byte(tc.doc), &v)
		if got := JSONProblem(err); got != tc.want {
			t.Errorf("JSONProblem(%s) = %q; want %q", tc.doc, got, tc.want)
		}
	}
	if got := JSONProblem(errors.New("other")); got != "other" {
		t.Errorf("JSONProblem(other) = %q; want the error's text", got)
	}
}
