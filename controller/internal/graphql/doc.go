// Package graphql is the HTTP transport that Legion's GraphQL clients
// (controller/linear, controller/github) share. It owns:
//
//   - the credential: read from an environment variable or a private file
//     (Secret), sent as the Authorization header value a client computes;
//   - the request: one POST of {query, operationName, variables} per
//     attempt (Client.Do);
//   - the reading of the answer (Service.Parse): success, an
//     authentication failure (ErrAuth), a transient failure, a malformed
//     response (ErrMalformed), the service's GraphQL errors;
//   - the retries: transient failures (HTTP 5xx, transport errors, rate
//     limits) are retried with capped, jittered exponential backoff that
//     honours the wait a server asks for, gives up with ErrRateLimited when
//     that wait is longer than Retry.MaxWait, and stops when the context
//     ends. An Operation that is not idempotent is retried only on rate
//     limits, which servers reject before executing.
//
// What differs between services is passed in, not special-cased here: a
// Service names the API and reads its own signals through small hooks
// (which responses are authentication failures or rate limits, how long
// they ask to wait, how its GraphQL errors become the client's error
// type); Options carry the endpoint, the Authorization header value and
// the retry policy of one client.
//
// The package must never log the credential, put it into an error, or
// accept it from a command line; never retry an operation after a failure
// that may have let it take effect; and never interpret a service's data,
// which is the client package's business.
package graphql
