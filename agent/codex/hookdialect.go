package codex

import "github.com/legion-dev/legion/ptyworker/proto"

// HookDialect is Codex's hooks as Claude Code's: they have Claude Code's
// names and payloads (X13) but for a failed model request, which Codex
// reports only as a PostModelRequest with status "failed" and its error
// text (X34: no Stop, no StopFailure): that one is Claude Code's
// StopFailure, its error kind read from the text, and the reset time of a
// ChatGPT plan's usage limit from its "try again at 2:12 PM." or "try
// again at Dec 1st, 2026 2:43 PM." (local time, minutes).
//
// A failed request Codex retries fires it too (X35): the agent is then
// at api_error until the retry's answer moves it on (a tool, Stop).
var HookDialect = proto.HookDialect{
	Failures: map[string]proto.Failure{
		"PostModelRequest": {
			When:    map[string]string{"status": "failed"},
			Message: "error",
			Errors: []proto.ErrorText{
				{Contains: "usage limit", Error: "rate_limit"},           // ChatGPT plan: "You’ve hit your usage limit. …"
				{Contains: "429 Too Many Requests", Error: "rate_limit"}, // "exceeded retry limit, last status: 429 Too Many Requests, …"
				{Contains: "Quota exceeded", Error: "billing_error"},     // insufficient_quota: the API credit is spent
				{Contains: "401 Unauthorized", Error: "authentication_failed"},
				{Contains: "last status: 5", Error: "server_error"},
			},
			ResetAfter:   "try again at ",
			ResetLayouts: []string{"Jan 2, 2006 3:04 PM", "3:04 PM"},
		},
	},
}

// HookDialect is [HookDialect]: `legion hook` translates the payloads of
// an agent whose environment names it (proto.EnvHookDialect, which
// Prepare sets).
func (*Kind) HookDialect() proto.HookDialect { return HookDialect }
