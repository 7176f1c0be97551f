package notify

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

// How errors name the channels' secrets (graphql.Secret reads them).
var (
	webhookSecret = graphql.Secret{Prefix: "notify", Name: "webhook secret", Short: "secret", File: "webhook secret file"}
	ntfyToken     = graphql.Secret{Prefix: "notify", Name: "ntfy token", Short: "token", File: "ntfy token file"}
)

// LinksFor is where t's notifications link to: notify.dashboard_url, or
// [web]'s address and port.
func LinksFor(t config.Team, web config.Web) Links {
	if t.Notify.DashboardURL != "" {
		return Links{Base: t.Notify.DashboardURL}
	}
	return Links{Base: "http://" + net.JoinHostPort(web.Address, strconv.Itoa(web.Port))}
}

// Channels are the channels t configures, their secrets read from the
// environment (getenv: the manager's, which the controller gets) or their
// 0600 files. desktop is the desktop channel, used when notify.desktop is
// true (nil: none in this binary). A channel that cannot be set up (its
// secret missing, a file others may read) is left out and named in the
// error; the others are returned with it.
func Channels(t config.Team, getenv func(string) string, desktop Channel, client *http.Client) ([]Channel, error) {
	n := t.Notify
	var out []Channel
	var errs []error
	if n.WebhookURL != "" {
		secret, err := webhookSecret.LoadWith(getenv, n.WebhookSecretEnv, n.WebhookSecretFile)
		if err == nil {
			var w *Webhook
			if w, err = NewWebhook(n.WebhookURL, secret, client); err == nil {
				out = append(out, w)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if n.NtfyURL != "" {
		token := ""
		var err error
		if n.NtfyTokenEnv != "" || n.NtfyTokenFile != "" {
			token, err = ntfyToken.LoadWith(getenv, n.NtfyTokenEnv, n.NtfyTokenFile)
		}
		if err == nil {
			var c *Ntfy
			if c, err = NewNtfy(n.NtfyURL, token, client); err == nil {
				out = append(out, c)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if n.Desktop {
		if desktop == nil {
			errs = append(errs, errors.New("notify: notify.desktop: this program has no desktop channel"))
		} else {
			out = append(out, desktop)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("team %s: %w", t.Name, err)
	}
	return out, nil
}

// StatePath is notify.json in the team's state directory.
func StatePath(stateDir string) string { return filepath.Join(stateDir, StateFile) }
