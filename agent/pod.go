package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/legion-dev/legion/config"
)

// A kind's agent on a cluster runs in a pod whose only lasting storage is
// its issue's volume: the files Prepare makes (Claude Code's settings
// with its hooks, the dialog answers in ~/.claude.json) must be made
// there, not where the controller plans. So the controller runs the
// kind's Plan and Prepare with the pod's paths and Session.PlanOnly (the
// launch: argv, environment), and ships the same inputs as a PodPrepare
// in the session's spec Secret; the pod's prepare command (`legion agent
// prepare FILE`, before the agent starts, at every start of a pod) runs
// the same Prepare there, which writes the files with the pod's own user
// and modes and merges into what the volume holds (~/.claude.json keeps
// what the agent wrote into it). One Prepare per kind, run twice, rather
// than a second copy of each kind's files to ship and install.

// PodPrepareFile is the name of the PodPrepare file in a session's spec
// Secret (api.SpawnArgs.KubeFiles).
const PodPrepareFile = "agent-prepare.json"

// PodPrepare is what a pod's prepare command runs Prepare with: the
// team's agent table for the session's mode, the session (paths of the
// pod), Plan's launch, and the launch the controller's Prepare returned,
// which the pod's Prepare must return too.
type PodPrepare struct {
	Agent   config.Agent `json:"agent"`
	Session Session      `json:"session"`
	Planned Launch       `json:"planned"`
	Want    Launch       `json:"want"`
}

// PlanForPod is kind's Prepare of s for a pod, writing nothing: the
// launch the worker is given, and the PodPrepare (encoded) with which
// the pod's prepare command makes the files. a is the team's agent table
// for s's mode, planned Plan's launch of s.
func PlanForPod(ctx context.Context, kind Kind, a config.Agent, s Session, planned Launch) (Launch, []byte, error) {
	s.Pod, s.PlanOnly = true, true
	l, err := kind.Prepare(ctx, s, planned)
	if err != nil {
		return Launch{}, nil, err
	}
	if l.Sandbox != nil {
		return Launch{}, nil, fmt.Errorf("prepare %s session %s for a pod: the kind drew a sandbox, which a pod cannot hold", kind.Name(), s.ID)
	}
	s.PlanOnly = false
	s.LookupEnv = nil // the pod's prepare command reads its own environment
	data, err := json.Marshal(PodPrepare{Agent: a, Session: s, Planned: planned, Want: l})
	if err != nil {
		return Launch{}, nil, fmt.Errorf("prepare %s session %s for a pod: %w", kind.Name(), s.ID, err)
	}
	return l, data, nil
}

// DecodePodPrepare reads a PodPrepare from data (from file, named in
// errors): one JSON object with no unknown field, for a pod (Pod set),
// whose session's paths are absolute.
func DecodePodPrepare(data []byte, file string) (PodPrepare, error) {
	var p PodPrepare
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return PodPrepare{}, fmt.Errorf("%s: want the JSON the controller writes for a pod's agent (agent.PodPrepare): %w", file, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return PodPrepare{}, fmt.Errorf("%s: want one JSON object, found more after it", file)
	}
	s := p.Session
	if !s.Pod || s.PlanOnly {
		return PodPrepare{}, fmt.Errorf("%s: want a session for a pod (pod true, plan_only false), got pod %t, plan_only %t", file, s.Pod, s.PlanOnly)
	}
	for what, path := range map[string]string{"cwd": s.Cwd, "repo": s.Repo, "home": s.Home, "dir": s.Dir} {
		if !filepath.IsAbs(path) {
			return PodPrepare{}, fmt.Errorf("%s: the session's %s is %q: want an absolute path", file, what, path)
		}
	}
	return p, nil
}

// RunPodPrepare runs kind's Prepare of p in the pod and checks that it
// gives the launch the controller planned (p.Want): a pod whose Prepare
// would start the agent otherwise (another legion, another environment)
// fails here, before its agent starts.
func RunPodPrepare(ctx context.Context, kind Kind, p PodPrepare) error {
	// A new issue's volume has no home yet: the first pod's prepare
	// runs before anything else wrote there.
	if err := os.MkdirAll(p.Session.Home, 0o700); err != nil {
		return fmt.Errorf("prepare %s session %s in its pod: make its home: %w", kind.Name(), p.Session.ID, err)
	}
	// The prepare command runs in the agent's environment, which holds
	// what the launch adds (Codex's CODEX_HOME, the session's own home):
	// read as the user's, it would have Prepare read the session's files
	// for the user's (a config.toml without the user's model provider).
	// The controller's Prepare saw none of them; neither does this one.
	s := p.Session
	s.LookupEnv = func(key string) (string, bool) {
		for _, kv := range p.Want.Env {
			if k, _, _ := strings.Cut(kv, "="); k == key {
				return "", false
			}
		}
		return os.LookupEnv(key)
	}
	l, err := kind.Prepare(ctx, s, p.Planned)
	if err != nil {
		return err
	}
	if !slices.Equal(l.ArgvNew, p.Want.ArgvNew) || !slices.Equal(l.ArgvResume, p.Want.ArgvResume) || !slices.Equal(l.Env, p.Want.Env) {
		return fmt.Errorf("prepare %s session %s in its pod: the pod's launch (argv %q, resume %q, env %q) is not the controller's (argv %q, resume %q, env %q)",
			kind.Name(), p.Session.ID, l.ArgvNew, l.ArgvResume, l.Env, p.Want.ArgvNew, p.Want.ArgvResume, p.Want.Env)
	}
	return nil
}
