package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/packaging/docs"
)

// docsFlags are the flags of the hidden `legion docs`.
type docsFlags struct {
	manDir        string
	completionDir string
}

// newDocsCmd is `legion docs`, run at build time (make man, make
// completions, make package) to generate the man pages and completion
// scripts from this command tree and config.Schema.
func newDocsCmd(_ *globals) *cobra.Command {
	var f docsFlags
	cmd := &cobra.Command{
		Use:   "docs [--man DIR] [--completions DIR]",
		Short: "Generate the man pages and shell completions (for packagers)",
		Long: `Docs writes legion(1), a page per subcommand and legion.toml(5) into
DIR/man1 and DIR/man5 (--man), and the bash, zsh and fish completion scripts
into DIR/bash/legion, DIR/zsh/_legion and DIR/fish/legion.fish
(--completions). Pages are dated from SOURCE_DATE_EPOCH when it is set.`,
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.manDir == "" && f.completionDir == "" {
				return usageError{errors.New("docs: give --man DIR, --completions DIR or both")}
			}
			return runDocs(cmd.Root(), f)
		},
	}
	cmd.Flags().StringVar(&f.manDir, "man", "", "write the man pages below `DIR` (man1/, man5/)")
	cmd.Flags().StringVar(&f.completionDir, "completions", "", "write the completion scripts below `DIR` (bash/, zsh/, fish/)")
	return cmd
}

func runDocs(root *cobra.Command, f docsFlags) error {
	date, err := sourceDate()
	if err != nil {
		return err
	}
	if f.manDir != "" {
		o := docs.PageOptions{
			Source:       "Legion " + version,
			Manual:       "Legion Manual",
			Date:         date,
			RootSections: rootSections(),
			RootSeeAlso:  []string{"legion.toml(5)", "systemctl(1)", "journalctl(1)", "loginctl(1)", "systemd.unit(5)"},
		}
		pages, err := docs.CommandPages(root, o)
		if err != nil {
			return err
		}
		pages = append(pages, docs.ConfigPage(config.Schema, o))
		if err := docs.WriteTree(f.manDir, pages); err != nil {
			return fmt.Errorf("docs: %w", err)
		}
	}
	if f.completionDir != "" {
		files, err := docs.Completions(root)
		if err != nil {
			return err
		}
		if err := docs.WriteTree(f.completionDir, files); err != nil {
			return fmt.Errorf("docs: %w", err)
		}
	}
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH (reproducible builds) or now.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now().UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("docs: SOURCE_DATE_EPOCH=%q: want seconds since 1970: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// rootSections are legion(1)'s sections beyond the command tree's.
func rootSections() []docs.Section {
	return []docs.Section{
		{Title: "EXIT STATUS", Items: []docs.Item{
			{Tag: fmt.Sprintf("`%d`", exitOK), Text: "Success."},
			{Tag: fmt.Sprintf("`%d`", exitError), Text: "The command failed; the message on standard error says what failed and what to do. " +
				fmt.Sprintf("`legion doctor` exits %d when any check fails. ", exitError) +
				"A command whose output pipe closes (`legion sessions logs -f NAME | head`) ends at once with it, quietly."},
			{Tag: fmt.Sprintf("`%d`", exitUsage), Text: "Bad flags or arguments, an unknown command among them."},
			{Tag: fmt.Sprintf("`%d`", exitInterrupted), Text: "Interrupted by Ctrl-C (SIGINT). A SIGTERM, as systemd stops the helper or a controller, is a success."},
		}},
		{Title: "ENVIRONMENT", Items: []docs.Item{
			{Tag: "`XDG_CONFIG_HOME`", Text: "Where legion.toml (legion/legion.toml) and the user's own units (systemd/user) are; default ~/.config."},
			{Tag: "`XDG_RUNTIME_DIR`", Text: "Where the user manager's private socket (systemd/private) and the helper's socket (legion/legion.sock) are; default /run/user/UID."},
			{Tag: "`XDG_STATE_HOME`", Text: "Where session transcripts, the session registry and the local tracker keep their state; default ~/.local/state."},
			{Tag: "`DBUS_SESSION_BUS_ADDRESS`", Text: "The session bus, used to reach the user manager when its private socket is missing."},
			{Tag: "`LINEAR_API_KEY`, `GITHUB_TOKEN`", Text: "Credentials of the Linear tracker and of the GitHub review source; legion.toml(5) can name other variables or files."},
		}},
		{Title: "FILES", Items: []docs.Item{
			{Tag: "~/.config/legion/legion.toml", Text: "The configuration; see legion.toml(5)."},
			{Tag: "/usr/lib/systemd/user/legion.socket, legion.service, legion@.service", Text: "The units a distribution package installs: the helper's socket and service, and the controller template."},
			{Tag: "~/.config/systemd/user/legion*", Text: "The units `legion install` writes: the same three, and per team a drop-in legion@TEAM.service.d/50-legion.conf and a slice legion-SHORT.slice."},
			{Tag: "/usr/libexec/legion/legion-pty-worker", Text: "The program each session's transient unit runs (a package's path; make install puts it in PREFIX/libexec/legion). legion looks for it beside its own executable first."},
			{Tag: "$XDG_RUNTIME_DIR/legion/legion.sock", Text: "The helper's socket, mode 0600."},
			{Tag: "/usr/share/doc/legion/legion.toml", Text: "Every configuration key with its default, commented out."},
		}},
	}
}
