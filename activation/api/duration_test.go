package api

import (
	"encoding/json"
	"testing"
	"time"
)

// TestDurationJSON: the one duration type reads Go's and systemd's syntax
// in JSON as in TOML, writes Go's, and refuses a negative or unitless one.
func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{`"90s"`, 90 * time.Second, true},
		{`"2min 30s"`, 150 * time.Second, true},
		{`"0"`, 0, true},
		{`"-1s"`, 0, false},
		{`"30"`, 0, false},
		{`30`, 0, false},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err == nil) != tt.ok || time.Duration(d) != tt.want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v, ok=%v", tt.in, time.Duration(d), err, tt.want, tt.ok)
		}
	}
	b, err := json.Marshal(struct{ D Duration }{Duration(150 * time.Second)})
	if err != nil || string(b) != `{"D":"2m30s"}` {
		t.Errorf("Marshal = %s, %v; want {\"D\":\"2m30s\"}", b, err)
	}
}
