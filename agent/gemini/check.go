package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/legion-dev/legion/agent"
)

// CheckName is "gemini".
func (*Kind) CheckName() string { return "gemini" }

// Check: can the Gemini agents of the team start and authenticate?
// The program of each mode that runs gemini must be found as
// `legion doctor` finds the team's agent (in the PATH of the user manager's
// environment, which workers get), and so must node, which the npm
// package's gemini script runs (`#!/usr/bin/env node`). The key is
// GEMINI_API_KEY (or GOOGLE_API_KEY) in that environment, or a Google
// sign-in (~/.gemini/oauth_creds.json, which Legion links into every
// conversation's Gemini home); neither is a warning. The user's
// ~/.gemini/settings.json must be plain JSON: Legion copies it.
func (*Kind) Check(e agent.CheckEnv) agent.Check {
	t := e.Team
	var c agent.Check
	var progs []string
	for _, m := range e.Modes {
		a := t.Agent.ForMode(m)
		for _, argv := range [][]string{a.New, a.Resume} {
			if len(argv) > 0 && !slices.Contains(progs, argv[0]) {
				progs = append(progs, argv[0])
			}
		}
	}
	progs = append(progs, "node")
	path := e.Getenv("PATH")
	var found []string
	for _, p := range progs {
		at := p
		if !strings.Contains(p, "/") {
			at = e.LookPath(p)
		} else if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			at = ""
		}
		if at == "" {
			c.Status = agent.CheckFail
			c.Detail = fmt.Sprintf("%s not found in the user manager's PATH (%s), which workers get", p, path)
			c.Fix = "install the Gemini CLI (npm install -g @google/gemini-cli; it needs Node 20) and put its directory in PATH in a file of " +
				e.EnvironmentDir + " (then `systemctl --user daemon-reload`), or give agent.new and agent.resume its absolute path"
			return c
		}
		found = append(found, at)
	}
	home := e.Getenv("HOME")
	if !filepath.IsAbs(home) {
		c.Status, c.Detail = agent.CheckWarn, "the user manager's environment has no absolute HOME: cannot find ~/.gemini"
		c.Fix = "set HOME in the user manager's environment"
		return c
	}
	settings := filepath.Join(home, ".gemini", "settings.json")
	if data, err := os.ReadFile(settings); err == nil {
		var v map[string]any
		if err := json.Unmarshal(data, &v); err != nil {
			c.Status, c.Detail = agent.CheckFail, fmt.Sprintf("%s is not a plain JSON object: %v (Legion copies it into every conversation's Gemini home, and reads no comments)", settings, err)
			c.Fix = "fix " + settings
			return c
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Detail = agent.CheckFail, fmt.Sprintf("%s cannot be read: %v", settings, err)
		c.Fix = "fix " + settings
		return c
	}
	for _, key := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		if e.Getenv(key) != "" {
			c.Status, c.Detail = agent.CheckOK, strings.Join(found, ", ")+"; "+key+" is set in the user manager's environment, which workers get"
			return c
		}
	}
	oauth := filepath.Join(home, ".gemini", "oauth_creds.json")
	if _, err := os.Stat(oauth); err == nil {
		c.Status, c.Detail = agent.CheckOK, strings.Join(found, ", ")+"; "+oauth+" (signed in with Google)"
		return c
	}
	c.Status = agent.CheckWarn
	c.Detail = fmt.Sprintf("%s; no GEMINI_API_KEY in the user manager's environment and no %s", strings.Join(found, ", "), oauth)
	c.Fix = fmt.Sprintf("put GEMINI_API_KEY=... in a file of %s (then `systemctl --user daemon-reload`), never on a command line; "+
		"or sign in with Google by running gemini once as this user", e.EnvironmentDir)
	return c
}
