package notify_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/notify"
)

// FuzzVerify: Verify reads headers a stranger sends. Whatever they hold
// it does not panic, and it accepts a delivery only when its signature is
// Sign's for that timestamp and body (its hex digits in either case).
func FuzzVerify(f *testing.F) {
	body := []byte(`{"event":"needs_you"}`)
	f.Add("1800000000", notify.Sign([]byte("k"), "1800000000", body), body)
	f.Add("", "sha256=", []byte{})
	f.Add("-1", "sha256=zz", []byte("x"))
	f.Add("99999999999999999999", "sha256=00", []byte("x"))
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(notify.HeaderTimestamp, ts)
		h.Set(notify.HeaderSignature, sig)
		err := notify.Verify([]byte("k"), h, body, time.Unix(1_800_000_000, 0), 0)
		// Hex digits are taken in either case.
		if err == nil && !strings.EqualFold(h.Get(notify.HeaderSignature), notify.Sign([]byte("k"), h.Get(notify.HeaderTimestamp), body)) {
			t.Errorf("Verify accepted %q for timestamp %q; Sign gives %q", sig, ts, notify.Sign([]byte("k"), ts, body))
		}
	})
}
