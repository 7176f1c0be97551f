package dashboard

import (
	"errors"
	"testing"

	"github.com/coder/websocket"
)

// FuzzParseTermMessage: any message of a page is either a well-formed
// control, input or resize, or a *closeError with a status and a reason
// that fits a close frame; never a panic.
func FuzzParseTermMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"control"}`, `{"type":"input","data":"ls\r"}`, `{"type":"resize","cols":80,"rows":24}`,
		`{"type":"resize","cols":-1,"rows":1e9}`, `{"type":"x"}`, `{"type":`, `[]`, `null`, `"control"`,
		`{"type":"input","data":"\u0000\ud800"}`,
	} {
		f.Add(true, []byte(s))
	}
	f.Add(false, []byte("keys"))
	f.Fuzz(func(t *testing.T, text bool, p []byte) {
		typ := websocket.MessageBinary
		if text {
			typ = websocket.MessageText
		}
		m, err := parseTermMessage(typ, p)
		if err != nil {
			var ce *closeError
			if !errors.As(err, &ce) || ce.status == 0 || ce.reason == "" || len(clipReason(ce.reason)) > 123 {
				t.Fatalf("parseTermMessage(%q) = %v; want a *closeError with a status and a reason", p, err)
			}
			return
		}
		switch m.Type {
		case "control":
		case "input":
			if m.Data == "" {
				t.Errorf("parseTermMessage(%q) accepted input without data", p)
			}
		case "resize":
			if m.Cols < minTermSize || m.Cols > maxTermSize || m.Rows < minTermSize || m.Rows > maxTermSize {
				t.Errorf("parseTermMessage(%q) accepted size %dx%d", p, m.Cols, m.Rows)
			}
		default:
			t.Errorf("parseTermMessage(%q) accepted type %q", p, m.Type)
		}
	})
}
