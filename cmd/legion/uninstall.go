package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/units"
)

// uninstallFlags are the flags of `legion uninstall`.
type uninstallFlags struct {
	dryRun  bool
	unitDir string
}

func newUninstallCmd(_ *globals) *cobra.Command {
	var f uninstallFlags
	cmd := &cobra.Command{
		Use:   "uninstall [--dry-run] [--unit-dir DIR]",
		Short: "Stop every Legion unit and remove the unit files Legion wrote",
		Long: `Uninstall stops every Legion unit (the team controllers legion@*.service,
the agent sessions legion-*.service, legion.service and legion.socket, the
dashboard's legion-web.service and legion-web.socket), resets
failed ones, removes the files Legion wrote from the unit directory (recognised
by their first line) with their enablement links and empty drop-in
directories, and reloads the user manager. Files Legion did not write are
never touched. Legion's config and state are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUninstall(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what uninstall would stop and remove, and change nothing")
	fl.StringVar(&f.unitDir, "unit-dir", "", "unit directory (default $XDG_CONFIG_HOME/systemd/user)")
	return cmd
}

func runUninstall(ctx context.Context, f uninstallFlags, stdout, stderr io.Writer) error {
	o := units.UninstallOptions{UnitDir: f.unitDir, DryRun: f.dryRun, Out: stdout}
	if o.UnitDir == "" {
		o.UnitDir = defaultUnitDir()
	}
	m, err := units.Connect(ctx)
	switch {
	case err == nil:
		defer m.Close()
		o.Manager = m
	case f.dryRun && errors.Is(err, units.ErrNoManager):
		// A dry run lists files even without a manager.
		fmt.Fprintln(stderr, "legion: no user manager reachable: listing files only")
	default:
		return err
	}
	res, err := units.Uninstall(ctx, o)
	if err != nil {
		return err
	}
	if len(res.Stopped) == 0 && len(res.Removed) == 0 {
		fmt.Fprintf(stdout, "nothing of Legion's is installed in %s or running\n", o.UnitDir)
		return nil
	}
	if f.dryRun {
		return nil // Uninstall printed the plan
	}
	for _, u := range res.Stopped {
		fmt.Fprintf(stdout, "stopped %s\n", u)
	}
	for _, p := range res.Removed {
		fmt.Fprintf(stdout, "removed %s\n", filepath.Join(o.UnitDir, p))
	}
	return nil
}
