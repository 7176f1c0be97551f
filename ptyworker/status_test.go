package ptyworker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestStatusQuestionCutOnRune has the agent wait on a question too long
// for STATUS=, with a two-byte character where it is cut. systemd drops a
// STATUS= that is not valid UTF-8 as a whole ("not UTF-8 clean"), so a cut
// inside a character lost the status.
func TestStatusQuestionCutOnRune(t *testing.T) {
	ns := listenNotify(t)
	spec := testSpec(t, "sh", "-c", "while :; do sleep 1; done")
	spec.SessionFile = filepath.Join(spec.Cwd, spec.SessionID+".jsonl")
	spec.StaleAfter = proto.Duration(300 * time.Millisecond)
	question := strings.Repeat("a", 76) + strings.Repeat("é", 10) + "?"
	q, err := json.Marshal(question)
	if err != nil {
		t.Fatal(err)
	}
	lines := fmt.Sprintf(`{"type":"user","uuid":"u1","sessionId":%[1]q,"message":{"role":"user","content":"start"}}
{"type":"assistant","uuid":"a1","sessionId":%[1]q,"message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"AskUserQuestion","input":{"questions":[{"question":%[2]s,"header":"Q","options":[{"label":"yes"},{"label":"no"}],"multiSelect":false}]}}]}}
`, spec.SessionID, q)
	if err := os.WriteFile(spec.SessionFile, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(spec.SessionFile, old, old)
	tw := startWorker(t, spec, Options{Tick: 50 * time.Millisecond})
	var st string
	waitFor(t, "STATUS= saying the agent waits on a human", func() bool {
		st = ns.last("STATUS")
		return strings.Contains(st, "waiting on a human")
	})
	if !utf8.ValidString(st) {
		t.Errorf("STATUS=%q is not valid UTF-8 (systemd drops it)", st)
	}
	if want := "waiting on a human: " + strings.Repeat("a", 76) + "..."; !strings.Contains(st, want) {
		t.Errorf("STATUS=%q; want it to hold %q", st, want)
	}
	tw.cancel()
	tw.wait()
}
