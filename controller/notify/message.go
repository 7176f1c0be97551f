package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/legion-dev/legion/controller"
)

// Events of a Message.
const (
	EventNeedsYou = "needs_you" // waits began: one, or a digest of several
	EventTest     = "test"      // `legion notify test`: a sample
)

// Message is what a channel sends: the webhook's JSON body as is, and
// what ntfy and the desktop show (Title, Text, Click).
type Message struct {
	Version  int       `json:"version"` // 1
	Event    string    `json:"event"`
	Team     string    `json:"team"`
	Delivery string    `json:"delivery"` // the same for every retry of these waits
	SentAt   time.Time `json:"sent_at"`
	// URL is the dashboard's needs-you queue of the team.
	URL   string `json:"url"`
	Waits []Item `json:"waits"`
}

// Item is one wait in a Message.
type Item struct {
	Key       string              `json:"key"`
	Issue     string              `json:"issue"`
	Title     string              `json:"title,omitempty"`
	Kind      controller.WaitKind `json:"kind"`
	Asked     string              `json:"asked"`
	AskedHash string              `json:"asked_hash"`
	Since     time.Time           `json:"since"`
	URL       string              `json:"url"` // the issue's card in the dashboard
}

// Links builds the dashboard's addresses from its base URL.
type Links struct{ Base string }

// Needs is the team's needs-you queue: BASE/#needs/TEAM.
func (l Links) Needs(team string) string {
	return strings.TrimRight(l.Base, "/") + "/#needs/" + url.PathEscape(team)
}

// Card is the issue's card in the queue: BASE/#needs/TEAM/ISSUE.
func (l Links) Card(team, issue string) string {
	return l.Needs(team) + "/" + url.PathEscape(issue)
}

// newMessage is the message announcing items of team (in the order
// given).
func newMessage(event, team string, l Links, items []Item, now time.Time) Message {
	keys := make([]string, 0, len(items))
	for i := range items {
		items[i].URL = l.Card(team, items[i].Issue)
		keys = append(keys, items[i].Key+"@"+items[i].Since.UTC().Format(time.RFC3339Nano)+"#"+items[i].AskedHash)
	}
	slices.Sort(keys)
	h := sha256.Sum256([]byte(event + "\n" + team + "\n" + strings.Join(keys, "\n")))
	return Message{Version: 1, Event: event, Team: team, Delivery: hex.EncodeToString(h[:16]),
		SentAt: now.UTC(), URL: l.Needs(team), Waits: items}
}

// itemOf is w as a message lists it.
func itemOf(w controller.Wait) Item {
	return Item{Key: w.Key, Issue: w.Issue, Title: w.Title, Kind: w.Kind, Asked: w.Asked, AskedHash: w.AskedHash, Since: w.Since}
}

// what says what a wait of kind k asks, in a few words.
func what(k controller.WaitKind) string {
	switch k {
	case controller.WaitQuestion:
		return "the agent asks a question"
	case controller.WaitPermission:
		return "the agent asks permission"
	case controller.WaitTurn:
		return "the agent stopped without finishing"
	case controller.WaitRateLimit:
		return "the agent hit the model API's limit"
	case controller.WaitUnfinished:
		return "the finisher did not close the issue"
	case controller.WaitFailed:
		return "a worker failed for good"
	case controller.WaitBudget:
		return "the issue's agents reached its budget"
	}
	return "Legion asks for input"
}

// Title is the message's headline: "demo DEMO-4: the agent asks a
// question", or for a digest "demo: 5 issues wait for you".
func (m Message) Title() string {
	prefix := ""
	if m.Event == EventTest {
		prefix = "[test] "
	}
	if len(m.Waits) == 1 {
		return prefix + m.Team + " " + m.Waits[0].Issue + ": " + what(m.Waits[0].Kind)
	}
	return fmt.Sprintf("%s%s: %d waits for you", prefix, m.Team, len(m.Waits))
}

// maxAsked bounds what a message quotes of one question, in bytes.
const maxAsked = 1500

// Text is the message's body as plain text: for one wait the issue's
// title and what is asked, for a digest a line per wait.
func (m Message) Text() string {
	var b strings.Builder
	if len(m.Waits) == 1 {
		it := m.Waits[0]
		if it.Title != "" {
			b.WriteString(it.Issue + " " + it.Title + "\n\n")
		}
		b.WriteString(clip(it.Asked, maxAsked))
		return b.String()
	}
	for _, it := range m.Waits {
		fmt.Fprintf(&b, "%s (%s) %s\n", it.Issue, it.Kind, it.Title)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Click is where opening the message leads: the issue's card, or the
// team's queue for a digest.
func (m Message) Click() string {
	if len(m.Waits) == 1 {
		return m.Waits[0].URL
	}
	return m.URL
}

// clip cuts s to at most n bytes at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Sample is the message `legion notify test` sends: one made-up question
// on issue SAMPLE-1 of team.
func Sample(team string, l Links, now time.Time) Message {
	it := Item{Key: "SAMPLE-1/input", Issue: "SAMPLE-1", Title: "A sample from legion notify test",
		Kind: controller.WaitQuestion, Asked: "The implement agent asks: is this channel set up? (Nothing waits: this is a test.)",
		Since: now.UTC()}
	h := sha256.Sum256([]byte(it.Asked))
	it.AskedHash = hex.EncodeToString(h[:])
	return newMessage(EventTest, team, l, []Item{it}, now)
}
