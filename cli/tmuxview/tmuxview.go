// Package tmuxview keeps a tmux session in step with a team's live agent
// sessions: one window per session, named <issue>-<mode>, coloured by role,
// each running `legion attach` on its session. It drives the real tmux
// binary with argv (never a shell string) and touches only the tmux session
// it is given.
//
// Follow (follow.go) is the client side of `legion tmux`: it follows the
// helper's session events through package activation/api and syncs the
// view at each. It runs in the view's own first window, never in the
// helper, and links no server code.
package tmuxview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Window is one window the view should have.
type Window struct {
	Name string   // <issue>-<mode>; also the window's identity
	Role string   // the mode; picks the colour
	Argv []string // what runs in it, e.g. legion attach <session>
}

// View is one tmux session on one tmux server.
type View struct {
	// Socket is tmux's -L socket name; empty means the default server.
	Socket string
	// Session is the tmux session name, e.g. legion-<short>.
	Session string
	// Config is tmux's -f file; empty means tmux's default.
	Config string
	// Env are VAR=value pairs set in every window the view creates (tmux
	// -e), over the tmux server's environment: a server started earlier,
	// elsewhere, may not have the caller's XDG_RUNTIME_DIR.
	Env []string
}

// colours per role, in tmux's colour names.
var colours = map[string]string{
	"plan": "colour39", "implement": "colour76", "review": "colour214",
	"retro": "colour141", "finish": "colour203", "controller": "colour226",
}

// Colour is the window-status colour of a role.
func Colour(role string) string {
	if c, ok := colours[role]; ok {
		return c
	}
	return "colour250"
}

// placeholder names the window a new tmux session starts with, which runs
// the follower that keeps the view in step; the session exists before (and
// after) every agent window.
const placeholder = "legion"

// Start makes sure the view exists with its follower: it creates the tmux
// session (and with it, when none runs, the tmux server, as a child of the
// caller: the server lives in the caller's cgroup, not a daemon's) with
// one window named "legion" running follower, or, when the session
// exists, runs follower anew in that window (a follower already there is
// replaced, so there is one). The follower adds and removes the agent
// windows (Sync).
func (v View) Start(ctx context.Context, follower []string) error {
	if !v.exists(ctx) {
		args := append([]string{"new-session", "-d", "-s", v.Session, "-n", placeholder}, v.envArgs()...)
		if _, err := v.tmux(ctx, append(append(args, "--"), follower...)...); err != nil {
			return fmt.Errorf("tmux view %s: %w", v.Session, err)
		}
		return nil
	}
	have, err := v.Windows(ctx)
	if err != nil {
		return err
	}
	args := []string{"new-window", "-d", "-t", v.Session + ":", "-n", placeholder}
	if slices.Contains(have, placeholder) {
		args = []string{"respawn-window", "-k", "-t", v.Session + ":" + placeholder}
	}
	args = append(append(args, v.envArgs()...), "--")
	if _, err := v.tmux(ctx, append(args, follower...)...); err != nil {
		return fmt.Errorf("tmux view %s: start its follower: %w", v.Session, err)
	}
	return nil
}

// envArgs are the -e options of Env.
func (v View) envArgs() []string {
	var args []string
	for _, kv := range v.Env {
		args = append(args, "-e", kv)
	}
	return args
}

// Sync makes the view's windows exactly want (plus the placeholder
// window): it adds missing windows and kills the windows of sessions that
// are gone. Windows that are already there are left alone, so an attached
// person sees no flicker. The session must exist (Start makes it).
func (v View) Sync(ctx context.Context, want []Window) error {
	have, err := v.Windows(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range want {
		if slices.Contains(have, w.Name) {
			continue
		}
		args := append([]string{"new-window", "-d", "-t", v.Session + ":", "-n", w.Name}, v.envArgs()...)
		args = append(append(args, "--"), w.Argv...)
		if _, err := v.tmux(ctx, args...); err != nil {
			errs = append(errs, fmt.Errorf("tmux view %s: add window %s: %w", v.Session, w.Name, err))
			continue
		}
		target := v.Session + ":" + w.Name
		c := Colour(w.Role)
		for _, opt := range [][]string{
			{"set-window-option", "-t", target, "window-status-style", "fg=" + c},
			{"set-window-option", "-t", target, "window-status-current-style", "fg=black,bg=" + c},
			{"set-window-option", "-t", target, "automatic-rename", "off"},
		} {
			if _, err := v.tmux(ctx, opt...); err != nil {
				errs = append(errs, fmt.Errorf("tmux view %s: style window %s: %w", v.Session, w.Name, err))
			}
		}
	}
	for _, name := range have {
		if name == placeholder || slices.ContainsFunc(want, func(w Window) bool { return w.Name == name }) {
			continue
		}
		if _, err := v.tmux(ctx, "kill-window", "-t", v.Session+":"+name); err != nil {
			errs = append(errs, fmt.Errorf("tmux view %s: remove window %s: %w", v.Session, name, err))
		}
	}
	return errors.Join(errs...)
}

// Windows lists the view's window names, in tmux's order.
func (v View) Windows(ctx context.Context) ([]string, error) {
	out, err := v.tmux(ctx, "list-windows", "-t", v.Session+":", "-F", "#{window_name}")
	if err != nil {
		return nil, fmt.Errorf("tmux view %s: list windows: %w", v.Session, err)
	}
	return strings.Fields(out), nil
}

// Kill ends the view's tmux session (no-op when it does not exist).
func (v View) Kill(ctx context.Context) error {
	if !v.exists(ctx) {
		return nil
	}
	if _, err := v.tmux(ctx, "kill-session", "-t", v.Session); err != nil {
		return fmt.Errorf("tmux view %s: %w", v.Session, err)
	}
	return nil
}

// Exists reports whether the view's tmux session exists. It is false with
// a nil error only when tmux itself says so (exit status 1: no such session
// or no server); a tmux that cannot run, or a cancelled ctx, is an error.
func (v View) Exists(ctx context.Context) (bool, error) {
	argv := append(v.base(), "has-session", "-t", "="+v.Session)
	err := exec.CommandContext(ctx, argv[0], argv[1:]...).Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	}
	return false, fmt.Errorf("tmux view %s: has-session: %w", v.Session, err)
}

func (v View) exists(ctx context.Context) bool {
	_, err := v.tmux(ctx, "has-session", "-t", "="+v.Session)
	return err == nil
}

// AttachArgv is the tmux command line a person runs to look at the view.
func (v View) AttachArgv() []string {
	return append(v.base(), "attach-session", "-t", v.Session)
}

func (v View) base() []string {
	argv := []string{"tmux"}
	if v.Socket != "" {
		argv = append(argv, "-L", v.Socket)
	}
	if v.Config != "" {
		argv = append(argv, "-f", v.Config)
	}
	return argv
}

func (v View) tmux(ctx context.Context, args ...string) (string, error) {
	argv := append(v.base(), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("tmux %s: %s: %w", args[0], msg, err)
		}
		return "", fmt.Errorf("tmux %s: %w", args[0], err)
	}
	return stdout.String(), nil
}
