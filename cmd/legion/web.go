package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/dashboard"
	"github.com/legion-dev/legion/internal/journal"
)

func newWebCmd(g *globals) *cobra.Command {
	var open, asJSON bool
	cmd := &cobra.Command{
		Use:   "web [--open]",
		Short: "Print the URL that logs a browser into the dashboard",
		Long: `Print the dashboard's login URL, http://127.0.0.1:PORT/login#t=TOKEN (web.address
and web.port of legion.toml). The token, kept 0600 in the state directory
($XDG_STATE_HOME/legion/web-token) and made on first use, rides in the URL's
fragment, which a browser never sends: the page exchanges it for a cookie.
Treat the URL as a password.

The dashboard is served by legion-web.service, which legion-web.socket starts
on the first connection (see legion install) and which exits when no page
has been connected for web.idle_exit. From another machine, forward its unix
socket: ssh -L 7787:/run/user/UID/legion/web.sock HOST, then open the URL.

With --open the URL is opened with xdg-open, through a page written 0600
under $XDG_RUNTIME_DIR/legion, so the token is on no command line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWeb(cmd.Context(), g, open, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the URL in a browser with xdg-open")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"url": ...} as JSON`)
	cmd.AddCommand(newWebServeCmd(g))
	return cmd
}

func runWeb(ctx context.Context, g *globals, open, asJSON bool, stdout, stderr io.Writer) error {
	// A command with subcommands gets no default --config from the root.
	if g.configPath == "" {
		p, err := config.DefaultPath()
		if err != nil {
			return fmt.Errorf("locate legion.toml: %w (pass --config)", err)
		}
		g.configPath = p
	}
	cfg, err := config.LoadOrEmpty(g.configPath)
	if err != nil {
		return err
	}
	url, err := webLoginURL(cfg)
	if err != nil {
		return err
	}
	if !cfg.Web.Local() {
		fmt.Fprintf(stderr, "warning: the dashboard listens on %s (web.address): other machines can reach its login page\n", cfg.Web.Listen())
	}
	if asJSON {
		if err := writeJSON(stdout, map[string]string{"url": url}); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintln(stdout, url); err != nil {
		return err
	}
	if !open {
		return nil
	}
	xdg, err := exec.LookPath("xdg-open")
	if err != nil {
		fmt.Fprintln(stderr, "legion web --open: xdg-open is not installed (Debian package xdg-utils); open the URL above by hand")
		return nil
	}
	rt, err := config.RuntimeDir()
	if err != nil {
		return err
	}
	page, err := dashboard.LoginPage(rt, url)
	if err != nil {
		return err
	}
	c := exec.CommandContext(ctx, xdg, page)
	c.Stdout, c.Stderr = stderr, stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("xdg-open %s: %w", page, err)
	}
	return nil
}

// webLoginURL is the login URL of cfg's dashboard, the token made on first
// use.
func webLoginURL(cfg *config.Config) (string, error) {
	state, err := config.StateDir()
	if err != nil {
		return "", err
	}
	tok, err := dashboard.LoadToken(filepath.Join(state, dashboard.TokenFile))
	if err != nil {
		return "", err
	}
	return dashboard.LoginURL(cfg.Web.Listen(), tok)
}

func newWebServeCmd(g *globals) *cobra.Command {
	var idleExit time.Duration
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the dashboard (started on demand by legion-web.socket)",
		Long: `Serve the dashboard on the sockets legion-web.socket passes (web.address:web.port
and $XDG_RUNTIME_DIR/legion/web.sock), or, run by hand, on web.address:web.port
itself. It follows the helper's session events and reads the teams' trackers
while a page is connected, and exits after web.idle_exit with no page
connected when socket-activated (--idle-exit overrides; run by hand it never
exits by itself unless given --idle-exit).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadOrEmpty(g.configPath)
			if err != nil {
				return err
			}
			idle := cfg.Web.IdleExit
			if os.Getenv("LISTEN_FDS") == "" {
				idle = 0
			}
			if cmd.Flags().Changed("idle-exit") {
				idle = idleExit
			}
			state, err := config.StateDir()
			if err != nil {
				return err
			}
			tok, err := dashboard.LoadToken(filepath.Join(state, dashboard.TokenFile))
			if err != nil {
				return err
			}
			log := journal.NewLogger(journal.IdentLegion, cfg.Helper.LogLevel).With("component", "web")
			ls, err := dashboard.Listeners(cfg.Web.Listen(), log)
			if err != nil {
				return err
			}
			s, err := dashboard.New(dashboard.Options{
				Token: tok, Logger: log, IdleExit: idle, ConfigPath: cfg.Path,
				Notify: func(state string) { daemon.SdNotify(false, state) },
			})
			if err != nil {
				return err
			}
			return s.Run(cmd.Context(), ls)
		},
	}
	cmd.Flags().DurationVar(&idleExit, "idle-exit", 0, "exit after this long with no page connected; 0 never (default: web.idle_exit when socket-activated, else never)")
	return cmd
}
