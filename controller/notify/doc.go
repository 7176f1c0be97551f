// Package notify tells people that something waits for them: one message
// per wait (an escalated issue, a failed worker: controller.Wait) with the
// team, the issue, what is asked and a link to its card in the dashboard,
// to each channel the team configures in [teams.<name>.notify]: a signed
// JSON webhook (webhook.go, whose signature scheme README: Operations:
// notifications documents and Verify checks), an ntfy topic (ntfy.go) and
// whatever else implements Channel (the desktop's
// org.freedesktop.Notifications, package internal/desktopnotify, which
// cmd/legion passes in so that no controller package links D-Bus).
//
// It owns the team's notify.json in its state directory: which waits were
// announced on which channel, written atomically before and after each
// send, so that a restarted controller sends no wait twice (short of a
// crash between a receiver's answer and that write: delivery is at least
// once, and the webhook's X-Legion-Delivery lets a receiver drop a
// repeat). It retries a failed send with capped exponential backoff for
// as long as the wait lasts, and sends one digest instead of a message
// per wait when DigestAt or more are due on a channel at once.
//
// It never decides what waits (package controller does), never reads a
// tracker or the helper, never logs or prints a secret, a token or a
// channel's full URL (an ntfy topic is its own password), and never
// blocks the controller's tick: Observe records and returns, Run sends.
package notify
