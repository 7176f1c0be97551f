package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/contrib/demo"
	"github.com/legion-dev/legion/dashboard/webtest"
)

// TestBoardRoomInBrowser: in a real Chromium, a team whose expected agent
// size (agent.memory_max, before any agent finished) is above the
// machine's available memory shows each Todo card waiting for room, with
// the memory available and the size expected, and no next action.
func TestBoardRoomInBrowser(t *testing.T) {
	f := webtest.Start(t, webtest.Options{Issues: demo.Issues, TrackerRefresh: 2 * time.Second,
		TeamTOML: "agent.memory_max = \"64T\"\n"})
	b := webtest.NewBrowser(t)
	b.Navigate(f.LoginURL())
	b.WaitJS("the board loaded", `document.body.dataset.state === "ready" && document.querySelector(".board")`)
	b.WaitJS("every Todo card waiting for room", `(() => {
		const cards = [...document.querySelectorAll('.column[data-status="Todo"] .card')];
		return cards.length === 3 && cards.every(c => c.querySelector('.room') && !c.querySelector('.next'));
	})()`)
	var text string
	if err := b.Eval(`document.querySelector('.card .room').textContent`, &text); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "waiting for room: ") || !strings.HasSuffix(text, " available, agents here may take up to 64 TiB (agent.memory_max)") {
		t.Errorf("the card says %q; want it waiting for room, with the memory available and agent.memory_max", text)
	}
	b.Screenshot("board-waiting-for-room")
}
