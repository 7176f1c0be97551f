package graphql

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary statuses, bodies and rate-limit headers to
// Parse. Nothing may panic, and every response gets exactly one reading:
// data (valid JSON), a transient failure, or an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"data":{"x":1}}`, `{"data":null}`, `{}`, `null`, `[]`, `"x"`, `<html>`, ``,
		`{"errors":[{"message":"m","extensions":{"code":"SLOW_DOWN"}}]}`,
		`{"errors":[{"message":"m","extensions":{"code":"X"}}],"data":{"a":null}}`,
		`{"errors":[1]}`, `{"errors":null,"data":{}}`, `{"message":"Bad credentials"}`, `{"message":{}}`,
	} {
		f.Add(200, s, "")
	}
	f.Add(401, `{"message":"no"}`, "")
	f.Add(429, `{}`, "7")
	f.Add(429, `{}`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(503, `oops`, "x")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		h := http.Header{"Retry-After": {retryAfter}}
		data, tr, err := testService.Parse("Op", status, h, []byte(body), time.Unix(0, 0))
		n := 0
		if data != nil {
			n++
			if !json.Valid(data) {
				t.Errorf("Parse(%d, %q) = data %q; want valid JSON", status, body, data)
			}
		}
		if tr != nil {
			n++
			if tr.Err == nil || tr.Wait < 0 {
				t.Errorf("Parse(%d, %q) = transient %+v; want an error and a wait ≥ 0", status, body, tr)
			}
		}
		if err != nil {
			n++
			if !strings.HasPrefix(err.Error(), "test: ") && !strings.HasPrefix(err.Error(), ErrAuth.Error()) {
				t.Errorf("Parse(%d, %q) error = %q; want it to start with the service's prefix", status, body, err)
			}
		}
		if n != 1 {
			t.Errorf("Parse(%d, %q) = %q, %+v, %v; want exactly one of them", status, body, data, tr, err)
		}
	})
}
