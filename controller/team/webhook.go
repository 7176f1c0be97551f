package team

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/internal/graphql"
	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/internal/privdir"
)

// WakeFile is the file in a team's state directory that wakes the team's
// controller: legion@TEAM follows the directory with inotify and ticks at
// once whenever the file is replaced (a rename onto it) or written, as it
// does for a person's write to its local tracker. The file holds one line
// saying who woke it and why, for the controller's log; its content is
// never acted on.
//
// A file rather than a signal to legion@TEAM.service: the dashboard, which
// writes it for GitHub's webhook, is a client of the helper and links no
// D-Bus client to ask the user manager to signal a unit; a file in the
// team's state directory needs only the write access the dashboard has
// already (it writes the answers people give to the local tracker there),
// under the same sandbox as now. A wake while the controller is stopped is
// simply not seen: the controller's first tick after a start reads
// everything anyway.
const WakeFile = "wake"

// StateDir is the state directory of t: stateHome/teams/<short id>, where
// stateHome is $XDG_STATE_HOME/legion (see Team.StateDir).
func StateDir(t config.Team, stateHome string) string {
	return filepath.Join(stateHome, "teams", t.ShortID())
}

// WakePath is the wake file of the team whose state directory is dir.
func WakePath(dir string) string {
	return filepath.Join(dir, WakeFile)
}

// Wake asks the controller of the team whose state directory is dir to
// tick now: it replaces the wake file (atomicfile: a rename onto it)
// with one line, reason (what woke it: "github issues delivery
// 72d3162e-..."). It creates dir (0700) when missing. It returns once the file is in place; whether a
// controller runs to see it is not its concern (see WakeFile).
func Wake(dir, reason string) error {
	if err := privdir.Ensure(dir); err != nil {
		return fmt.Errorf("wake the controller: %w", err)
	}
	if err := atomicfile.WritePrivate(WakePath(dir), []byte(reason+"\n")); err != nil {
		return fmt.Errorf("wake the controller: %w", err)
	}
	return nil
}

// webhookSecret is how errors name the webhook's secret.
var webhookSecret = graphql.Secret{Prefix: "github", Name: "webhook secret", Short: "secret", File: "webhook secret file"}

// WebhookSecret reads the secret of t's GitHub webhook from
// github.webhook_secret_file: the file's first line that is neither empty
// nor a # comment. A file readable by group or others is refused, as the
// team's other credentials files are. The error never contains the
// secret. A team without the key has no webhook: ErrNoWebhook.
func WebhookSecret(t config.Team) (string, error) {
	if t.GitHub.WebhookSecretFile == "" {
		return "", ErrNoWebhook
	}
	s, err := webhookSecret.Load("", t.GitHub.WebhookSecretFile)
	if err != nil {
		return "", fmt.Errorf("team %s: %w", t.Name, err)
	}
	return s, nil
}

// ErrNoWebhook is WebhookSecret's error for a team without
// github.webhook_secret_file.
var ErrNoWebhook = errors.New("no github.webhook_secret_file: the team takes no GitHub webhook")
