package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/desktopnotify"
	"github.com/legion-dev/legion/internal/privdir"
)

func newNotifyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Test the channels that tell people a wait began",
	}
	var asJSON bool
	test := &cobra.Command{
		Use:   "test TEAM",
		Short: "Send a sample notification to each of a team's channels",
		Long: `Send one sample message (a made-up question on issue SAMPLE-1) to every
channel [teams.TEAM.notify] configures: the webhook, the ntfy topic and the
desktop. It prints what each answered, or why it failed; it records nothing,
so the controller's own notifications are unaffected.

Secrets come from the user manager's environment (systemctl --user
show-environment, what the controller gets), else this command's own, else
their 0600 files. Exit status 1 when any channel failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, t, err := loadTeam(g, args[0])
			if err != nil {
				return err
			}
			chans, err := notifyChannels(cmd.Context(), t)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "legion notify test:", err)
			}
			if len(chans) == 0 && err == nil {
				return fmt.Errorf("team %s has no notification channel: set notify.webhook_url, notify.ntfy_url or notify.desktop in [teams.%s.notify] of %s", t.Name, t.Name, cfg.Path)
			}
			answers := notify.Test(cmd.Context(), t.Name, notify.LinksFor(t, cfg.Web), chans)
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), answers); err != nil {
					return err
				}
			} else if err := printAnswers(cmd.OutOrStdout(), answers); err != nil {
				return err
			}
			failed := 0
			for _, a := range answers {
				if a.Err != "" && !a.Skipped {
					failed++
				}
			}
			if failed > 0 || err != nil {
				return fmt.Errorf("notify test: %d of %d channels failed (see above)", failed, len(answers))
			}
			return nil
		},
	}
	test.Flags().BoolVar(&asJSON, "json", false, "print JSON (channel, answer, error, skipped)")
	cmd.AddCommand(test)
	return cmd
}

func printAnswers(w io.Writer, answers []notify.Answer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tRESULT\tANSWER")
	for _, a := range answers {
		switch {
		case a.Skipped:
			fmt.Fprintf(tw, "%s\tskipped\t%s\n", a.Channel, a.Err)
		case a.Err != "":
			fmt.Fprintf(tw, "%s\tfailed\t%s\n", a.Channel, a.Err)
		default:
			fmt.Fprintf(tw, "%s\tsent\t%s\n", a.Channel, a.Answer)
		}
	}
	return tw.Flush()
}

// notifyChannels are team t's notification channels with their secrets
// from the user manager's environment, else this process's, else their
// files.
func notifyChannels(ctx context.Context, t config.Team) ([]notify.Channel, error) {
	lookup, _ := managerLookupEnv(ctx) // no manager: this process's environment stands in
	getenv := func(k string) string {
		if lookup != nil {
			if v, ok := lookup(k); ok && v != "" {
				return v
			}
		}
		return os.Getenv(k)
	}
	return notify.Channels(t, getenv, &desktopnotify.Desktop{}, nil)
}

// newNotifier is the notifier of tm's controller, nil when the team
// configures no channel. A channel that cannot be set up is logged and
// left out: the controller runs without it.
func newNotifier(tm *team.Team, cfg *config.Config, log *slog.Logger) (*notify.Notifier, error) {
	if !tm.Team.Notify.Any() {
		return nil, nil
	}
	chans, err := notify.Channels(tm.Team, os.Getenv, &desktopnotify.Desktop{}, nil)
	if err != nil {
		log.Error("notify: a channel is left out", "err", err)
	}
	if len(chans) == 0 {
		return nil, nil
	}
	if err := privdir.Ensure(tm.StateDir); err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	return notify.New(notify.Options{Team: tm.Name, Channels: chans, Links: notify.LinksFor(tm.Team, cfg.Web),
		StatePath: notify.StatePath(tm.StateDir), Log: log})
}
