package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/atomicfile"
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
	// Home are the user's own config files of the kind (UserConfiger),
	// read where the controller plans, by their path under the pod's
	// home: the pod's prepare writes them there before Prepare reads
	// them, as it reads the user's here.
	Home map[string][]byte `json:"home,omitempty"`
}

// UserConfiger is a kind whose CLI reads config of the user's own beside
// what Prepare writes: the model provider Codex's config.toml names,
// opencode's opencode.json, Gemini CLI's settings. A pod has none of this
// machine's files, so PlanForPod ships these to the pod's home, as the
// team's legion.toml is shipped (the pod's own, made from the user's).
// Credentials are not among them (Codex's auth.json, Gemini CLI's OAuth
// file): an agent's key reaches a pod from the team's Secret
// (kubernetes.secret_env).
type UserConfiger interface {
	// UserConfig lists the user's config files of the kind: where each
	// is on this machine, home and lookupEnv the user's, and where it
	// goes under the pod's home (a local path). A file that does not
	// exist is left out.
	UserConfig(home string, lookupEnv func(string) (string, bool)) []HomeFile
}

// HomeFile is one of the user's config files: From on this machine, To
// under the pod's home.
type HomeFile struct{ From, To string }

// maxPodHome bounds the user's files shipped to a pod: the spawn's
// kube_files that carry them (base64 in the JSON) hold 128 KiB in all.
const maxPodHome = 64 << 10

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
	home, err := userHome(kind, s)
	if err != nil {
		return Launch{}, nil, fmt.Errorf("prepare %s session %s for a pod: %w", kind.Name(), s.ID, err)
	}
	s.PlanOnly = false
	s.LookupEnv = nil // the pod's prepare command reads its own environment
	data, err := json.Marshal(PodPrepare{Agent: a, Session: s, Planned: planned, Want: l, Home: home})
	if err != nil {
		return Launch{}, nil, fmt.Errorf("prepare %s session %s for a pod: %w", kind.Name(), s.ID, err)
	}
	return l, data, nil
}

// userHome reads the user's config files of kind (UserConfiger) for
// s's pod, from the home and environment of s.LookupEnv (the user
// manager's), else this process's.
func userHome(kind Kind, s Session) (map[string][]byte, error) {
	uc, ok := kind.(UserConfiger)
	if !ok {
		return nil, nil
	}
	lookup := s.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	home, _ := lookup("HOME")
	if !filepath.IsAbs(home) {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("the user's config of the kind: no home directory: %w", err)
		}
		home = h
	}
	out := map[string][]byte{}
	total := 0
	for _, f := range uc.UserConfig(home, lookup) {
		data, err := os.ReadFile(f.From)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the user's config for the pod: %w", err)
		}
		if total += len(data); total > maxPodHome {
			return nil, fmt.Errorf("the user's config for the pod: %s makes %d bytes in all; the plan carries at most %d (the session's spec Secret holds it): shorten it", f.From, total, maxPodHome)
		}
		out[f.To] = data
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
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
	for rel := range p.Home {
		if !filepath.IsLocal(rel) {
			return PodPrepare{}, fmt.Errorf("%s: the user's file %q: want a path under the pod's home", file, rel)
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
	if err := writeHome(p.Session.Home, p.Home); err != nil {
		return fmt.Errorf("prepare %s session %s in its pod: %w", kind.Name(), p.Session.ID, err)
	}
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

// writeHome writes the user's files under home (their parent directories
// 0700, the files 0600), replacing what an earlier start wrote: the
// user's config on the controller's machine is the one that counts.
func writeHome(home string, files map[string][]byte) error {
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("the user's config: %w", err)
		}
		if err := atomicfile.WritePrivate(path, files[rel]); err != nil {
			return fmt.Errorf("the user's config: %w", err)
		}
	}
	return nil
}
