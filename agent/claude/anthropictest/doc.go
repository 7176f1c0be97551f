// Package anthropictest is a stand-in for the Anthropic Messages API, for
// tests that run the real Claude Code CLI offline: an httptest.Server on
// loopback that answers POST /v1/messages from a script of turns per
// session, and records every request for assertions.
//
// Point the CLI at it with ANTHROPIC_BASE_URL=s.URL (and a key, see
// Server.Key). Outside tests only `legion demo --agent claude` (in a legion
// built with the demo tag) uses it (Start), to run the real CLI with nothing leaving the machine; it never
// reaches the network.
//
// # Sessions and turns
//
// Claude Code sends the header x-claude-code-session-id on every request
// (agent/claude/FACTS.md); the server keys its scripts by that header.
// Script(session, turns...) queues turns for a session; each request takes
// the first queued turn of its session whose Match accepts it (nil matches
// any), else the first of the turns scripted for AnySession. A request with
// no turn left is answered with a short end_turn text saying so, and marked
// Unscripted in the record, so a test sees it rather than hangs.
//
// A turn is a list of content blocks (Text, Thinking, ToolUse and the
// helpers for the tools Legion cares about: Bash, Write, AskUserQuestion,
// Agent) and a stop reason; or a Failure (an HTTP error: RateLimited,
// Unauthorized, Overloaded); or a stream that stalls (Stall) after some
// events until the test releases it or the client goes away.
//
// # Follow mode
//
// After Follow, a request that no scripted turn answers is answered by a
// model that knows nothing but what the request holds
// (internal/followmodel, whose doc says what it does and its traits): the
// request's messages become a transcript (text blocks, Bash calls by their
// command, AskUserQuestion calls by their first question, tool_results
// with is_error; the system prompt is left out), and its decision becomes
// a Bash call with a description, an AskUserQuestion call (when the
// request offers the tool and the instructions name it; a header
// "Question", each option described "Answer <label>"), or a text with
// stop_reason end_turn. Request.Followed records the decision. A scripted
// turn with Follow set delivers the follow model's answer its own way: a
// Stall holds the model's message mid-stream, as a real API's stream can
// hang (the chaos run's model-stall fault).
//
// # What is faithful
//
//   - The SSE stream, in framing and order as the API docs and the
//     official Python SDK's stream fixtures show it: "event: NAME\ndata:
//     JSON\n\n" for message_start (a Message with empty content,
//     stop_reason null, usage), then per block content_block_start (text
//     "", thinking with empty thinking and signature, tool_use with input
//     {}), content_block_delta (text_delta, thinking_delta then one
//     signature_delta, input_json_delta: the tool input as JSON text split
//     across several partial_json chunks, the first one empty, never inside
//     a UTF-8 character), content_block_stop; a ping after the first block
//     starts (its data spaced, {"type": "ping"}, as in those fixtures);
//     message_delta (delta.stop_reason, stop_sequence null, cumulative
//     usage.output_tokens) and message_stop. Data JSON is compact with
//     "type" first and no HTML escaping. Each event is flushed on its own.
//     Content-Type text/event-stream, a request-id header (req_…), ids
//     msg_…/toolu_….
//   - Error responses: the HTTP status with the body
//     {"type":"error","error":{"type","message"},"request_id"} and the
//     request-id header; 429 rate_limit_error with retry-after and the
//     anthropic-ratelimit-requests-{limit,remaining,reset} headers (reset in
//     RFC 3339), 401 authentication_error, 529 overloaded_error. A 429 as a
//     Claude subscription's usage limit sends it (UsageLimited: the
//     anthropic-ratelimit-unified-{status,reset,representative-claim}
//     headers Claude Code reads, reset in Unix seconds). An error event
//     inside a stream ("event: error") for StreamError.
//   - HEAD/GET /api/hello answers 200, the only other call the CLI makes
//     offline. A request without the configured key (x-api-key, or
//     Authorization: Bearer) gets 401 authentication_error.
//   - A request with "stream": false gets the whole Message as JSON.
//
// # What is simplified
//
//   - Token counts are estimates (about four bytes a token), not a
//     tokenizer's; cache and service-tier fields are fixed.
//   - The request is not validated beyond being JSON with a model: no
//     checks of roles, alternation, tool_result pairing, max_tokens, or
//     betas (which the real API would reject with 400 invalid_request_error).
//   - Thinking signatures are opaque fixed strings, not verifiable, and the
//     server never checks thinking blocks sent back to it.
//   - Chunking is regular (a few pieces per text, fixed-size JSON pieces);
//     the real model's pacing is irregular and can pause for seconds between
//     events (Turn.EventDelay imitates a slow stream).
//   - No count_tokens, models, or batches endpoints (the CLI was not seen
//     calling them): they answer 404 not_found_error.
//   - The server does not retry, rate-limit or overload by itself: only a
//     scripted Failure does. Claude Code 2.1.330 retries 429, 401 and 529
//     on its own (10 retries, backoff to about 40 s, retry-after ignored:
//     about 3 minutes before its StopFailure hook), but not a UsageLimited
//     429; a script that must keep failing sets Repeat (or Forever), and a
//     test that wants the failure at once starts the CLI with
//     CLAUDE_CODE_MAX_RETRIES=0.
//
// Every request is recorded with the time it arrived (Request.Time), so a
// test can see the client's retries and their spacing.
package anthropictest
