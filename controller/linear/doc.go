// Package linear is Legion's client of Linear's GraphQL API
// (https://api.linear.app/graphql): it implements controller.Tracker for one
// Linear team.
//
// Per controller tick, Issues is one logical query: the team's open issues
// with state, labels, the latest comments and the branch name, fetched page
// by page (cursor pagination; one HTTP request per page, never one per
// issue). Writes resolve what they need once per Client and cache it: the
// team's workflow states (Move), label ids (AddLabel, RemoveLabel; Legion's
// protocol labels are created when missing), issue UUIDs (from the last
// Issues).
//
// Transient failures (HTTP 5xx, transport errors, HTTP 429 and Linear's
// RATELIMITED error code) are retried with capped, jittered exponential
// backoff that honours Retry-After and X-RateLimit-*-Reset and stops when
// the context ends. Writes that are not idempotent (comments, label
// creation) are retried only on rate limits, which Linear rejects before
// executing, so a comment is never posted twice. That mechanism is
// controller/internal/graphql's, shared with package github; this package
// gives it what is Linear's: the Authorization header, the error codes,
// the rate-limit headers.
//
// The package must never log the API key or put it into an error, never
// accept it from a command line, and never create labels other than the
// label protocol's (README: How an issue moves).
package linear
