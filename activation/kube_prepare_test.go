package activation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestKubePrepare: a cluster session's prepare commands run in its pod
// (the real worker, run with runc on a kwok node) before the agent: they
// make the agent's directory on the volume and copy into it a
// file of the session's spec Secret (KubeFiles, at /run/legion-spec),
// which the agent then reads. Beside it, a session whose prepare always
// fails never starts its agent: each pod's worker exits 1 (not 78), so
// the Job tries a new pod until its backoff limit, and the registry on
// the volume holds the command's cause.
func TestKubePrepare(t *testing.T) {
	c, _ := runPodsCluster(t)
	const ns = "legion-prepare"
	kubeNamespace(t, c, ns, 2)
	ip := startInProcess(t, true, Options{KubeBinary: sdtest.KubeBinary(t)})
	cl := ip.client(t)
	ctx := t.Context()

	const toml = "[team.demo]\nengine = \"kubernetes\"\n"
	repo := wire.WorkDir + "/repo"
	a := kubeLaunch(c, ns, "DEMO-11", "implement")
	a.Cwd = repo // made by the first prepare command
	a.Argv = []string{"/bin/sh", "-c", `cat legion.toml > seen`}
	a.KubeFiles = map[string][]byte{"legion.toml": []byte(toml)}
	a.Prepare = [][]string{
		{"/bin/mkdir", "-p", repo},
		{"/bin/cp", wire.SpecDir + "/legion.toml", repo + "/legion.toml"},
	}
	if _, err := cl.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := kubeLaunch(c, ns, "DEMO-12", "implement")
	b.Cwd = wire.VolumeMount
	b.Argv = []string{"/bin/touch", wire.VolumeMount + "/started"}
	b.StartLimitBurst = 2
	b.Prepare = [][]string{{"/bin/sh", "-c", "echo 'fatal: no legion.toml here' >&2; exit 1"}}
	if _, err := cl.Spawn(ctx, b); err != nil {
		t.Fatal(err)
	}

	kubeSession(t, cl, a.Name, "exited 0 (its agent read the file)", func(s api.Session) bool {
		return s.State == api.StateExited && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 0
	})
	pods := podsOf(t, c, ns, a.ID)
	if len(pods) != 1 {
		t.Fatalf("%d pods; want 1", len(pods))
	}
	vol := c.VolumeDir(ns, pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	seen, err := os.ReadFile(filepath.Join(vol, "work", "repo", "seen"))
	if err != nil || string(seen) != toml {
		t.Errorf("the agent saw %q, %v; want the spec Secret's legion.toml, %q", seen, err, toml)
	}

	s := kubeSession(t, cl, b.Name, "failed at its start limit", func(s api.Session) bool {
		return s.State == api.StateFailed && s.Exit != nil && s.Exit.Code != nil
	})
	// The count in the cause may lag the pods (the Job's status.failed
	// can be 1 when its Failed condition comes): the pods and the
	// registry say there were two runs.
	if *s.Exit.Code != 1 || !strings.Contains(s.Cause, "the start limit hit: ") {
		t.Errorf("failed session: exit %d, cause %q; want exit 1 and the start limit hit (a prepare failure is retried, not failed for good)", *s.Exit.Code, s.Cause)
	}
	pods = podsOf(t, c, ns, b.ID)
	if len(pods) != 2 {
		t.Errorf("%d pods; want 2 (the start limit)", len(pods))
	}
	vol = c.VolumeDir(ns, pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	const cause = proto.StartFailedPrefix + "prepare: sh: exit 1: fatal: no legion.toml here"
	waitfor.Check(t, 30*time.Second, "the registry on the volume to say why run 2 failed", func() error {
		r, err := proto.ReadRegistry(filepath.Join(vol, "state", "registry", b.ID+".json"))
		if err != nil {
			return err
		}
		if r.Run != 2 || r.LastExit == nil || r.LastExit.Reason != cause {
			return fmt.Errorf("registry %+v, last exit %+v; want run 2, %q", r, r.LastExit, cause)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(vol, "started")); err == nil {
		t.Errorf("the agent was started though its prepare failed")
	}
}
