package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/legion-dev/legion/dashboard"
)

// serveWeb serves the dashboard from this process on a free loopback port
// for the demo's length (Options.Web) and prints its login URL. The token
// is the user's (dashboard.LoadToken in the state dir), as `legion web` prints
// it; the demo's team is the only one the server's legion.toml lists.
func (d *run) serveWeb(cfgPath string) error {
	tok, err := dashboard.LoadToken(filepath.Join(d.state, dashboard.TokenFile))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	s, err := dashboard.New(dashboard.Options{Token: tok, ConfigPath: cfgPath, Logger: d.o.Log})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: listen for the dashboard: %w", err)
	}
	url, err := dashboard.LoginURL(l.Addr().String(), tok)
	if err != nil {
		l.Close()
		return fmt.Errorf("demo: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, []net.Listener{l}) }() // ends with cancel, in stopWeb
	d.stopWeb = func() error {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("demo: dashboard: %w", err)
		}
		return nil
	}
	fmt.Fprintf(d.o.Out, "dashboard (open it in a browser; add --keep to look at it after the end):\n  %s\n", url)
	return nil
}
