// Package dashboard is Legion's dashboard: an HTTP server (`legion web serve`,
// socket-activated by legion-web.socket) that shows every team's board,
// what waits for a person, live sessions and their history, in a browser.
//
// It is a client of the helper's API (package activation/api), like
// `legion attach` and `legion tmux`: it follows sessions.watch once for
// every page and reads the teams' trackers through package controller. It
// never imports package activation (the helper's server), and it holds no
// state of its own but the login token (and, in memory, the digests of
// the last GitHub webhook deliveries, to refuse a replay).
//
// Access: a token (TokenFile in Legion's state directory, 0600, made on
// first use by LoadToken). `legion web` prints the login URL
// http://HOST:PORT/login#t=TOKEN: the token rides in the fragment, which a
// browser never sends, and the page's script POSTs it to /api/login for an
// HttpOnly SameSite=Strict cookie, so the token appears in no request
// line, log or Referer. Every /api/ route but the login needs the cookie
// (or "Authorization: Bearer TOKEN"): 401 without it. Every request that
// changes something, and every WebSocket upgrade, must come from the
// dashboard's own origin: 403 otherwise.
//
// Routes (Go ServeMux patterns, registered in routes): the app shell (/,
// /login, /static/...: go:embed of static/, third-party code pinned under
// static/vendor), JSON under /api/ (errors as {"error": "..."}), and one
// WebSocket per page, /api/events, that carries Event values (and, while
// the Session view shows a session, its terminal's, /api/sessions/NAME/term:
// see termsocket.go). Every WebSocket reads at most ReadLimit bytes a
// message; a malformed frame or an oversize message closes that connection
// with a reason and touches nothing else.
//
// GitHub's webhook: POST /hooks/github/TEAM (githook.go), for a team with
// github.webhook_secret_file, needs no token: the delivery's
// X-Hub-Signature-256 (HMAC-SHA256 of the body under that secret) is its
// authentication, checked in constant time before the body is decoded. A
// verified event of the team's repository wakes its controller through
// the team's wake file (team.Wake); it never changes the tracker itself.
//
// The page: static/app.js is the shell (header, team picker, tab router,
// the event socket with reconnect) and views register themselves with
// Legion.registerView(name, {render(el, ctx), onEvent(ev)}).
package dashboard
