package kube

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
)

const (
	teamID    = "6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f"
	sessionID = "0b8c1a55-8f3e-4d0c-9d6e-1f2a3b4c5d6e"
)

func testTarget() api.KubeTarget {
	return api.KubeTarget{Namespace: "legion-demo", Image: "reg.example/legion-worker:1", Storage: "10Gi",
		CPURequest: "500m", MemoryRequest: "1Gi", MemoryLimit: "2Gi", SecretName: "demo-agents"}
}

func testSession() wire.Spawn {
	return wire.Spawn{
		ID: sessionID, Name: "DEMO-1-plan", Team: "demo team", TeamID: teamID, Issue: "DEMO-1", Mode: "plan",
		Unit:            "legion-6f1c2e0a-DEMO\\x2d1-plan.service",
		Spec:            []byte(`{"token":"SECRET-TOKEN"}`),
		StartLimitBurst: 5,
	}
}

func TestBuildHardenedJob(t *testing.T) {
	o, err := Build(testTarget(), testSession())
	if err != nil {
		t.Fatal(err)
	}
	j := o.Job
	if *j.Spec.BackoffLimit != 4 {
		t.Errorf("backoffLimit %d, want start_limit_burst-1 = 4", *j.Spec.BackoffLimit)
	}
	if *j.Spec.PodReplacementPolicy != batchv1.Failed {
		t.Errorf("podReplacementPolicy %s, want Failed (never two pods of a session at once)", *j.Spec.PodReplacementPolicy)
	}
	rules := j.Spec.PodFailurePolicy.Rules
	if len(rules) != 2 || rules[0].Action != batchv1.PodFailurePolicyActionFailJob || rules[0].OnExitCodes.Values[0] != 78 ||
		rules[1].Action != batchv1.PodFailurePolicyActionIgnore || rules[1].OnPodConditions[0].Type != corev1.DisruptionTarget {
		t.Errorf("podFailurePolicy %+v: want FailJob on exit 78, Ignore on DisruptionTarget", rules)
	}
	p := j.Spec.Template.Spec
	if p.RestartPolicy != corev1.RestartPolicyNever || *p.AutomountServiceAccountToken {
		t.Errorf("restartPolicy %s, automount %v: want Never and no service account token", p.RestartPolicy, *p.AutomountServiceAccountToken)
	}
	sc := p.SecurityContext
	if !*sc.RunAsNonRoot || *sc.RunAsUser == 0 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v: want non-root, seccomp RuntimeDefault", sc)
	}
	c := p.Containers[0]
	cs := c.SecurityContext
	if *cs.AllowPrivilegeEscalation || *cs.Privileged || !*cs.ReadOnlyRootFilesystem || len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v: want no escalation, read-only root, all capabilities dropped", cs)
	}
	if c.Resources.Limits.Memory().String() != "2Gi" || c.Resources.Requests.Cpu().String() != "500m" {
		t.Errorf("resources %+v", c.Resources)
	}
	// The control token is in the Secret only: not in the Job's JSON.
	b, _ := json.Marshal(j)
	if strings.Contains(string(b), "SECRET-TOKEN") {
		t.Errorf("the Job's spec holds the control token: %s", b)
	}
	if string(o.Secret.Data["spec.json"]) != `{"token":"SECRET-TOKEN"}` {
		t.Errorf("secret data %q", o.Secret.Data)
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil || strings.Contains(e.Value, "SECRET") {
			t.Errorf("env %s: secrets are files, never env", e.Name)
		}
	}
	if j.Labels[LabelSession] != sessionID || j.Labels[LabelTeamID] != teamID || j.Annotations[AnnotIssue] != "DEMO-1" || j.Labels[LabelIssue] != "demo-1-"+j.Labels[LabelIssue][len("demo-1-"):] {
		t.Errorf("labels %v annotations %v", j.Labels, j.Annotations)
	}
	var mounted []string
	for _, m := range c.VolumeMounts {
		mounted = append(mounted, m.MountPath)
	}
	if got := strings.Join(mounted, " "); got != "/legion /run/legion-spec /run/legion /tmp /run/secrets/legion" {
		t.Errorf("mounts %s", got)
	}
}

// Every phase of one issue mounts the same volume; another issue, or the
// same identifier in another team, gets its own.
func TestBuildVolumePerIssue(t *testing.T) {
	name := func(mut func(*wire.Spawn)) string {
		s := testSession()
		mut(&s)
		o, err := Build(testTarget(), s)
		if err != nil {
			t.Fatal(err)
		}
		if o.Job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != o.Volume.Name {
			t.Fatalf("the pod mounts %s, not the volume %s", o.Job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName, o.Volume.Name)
		}
		return o.Volume.Name
	}
	plan := name(func(*wire.Spawn) {})
	impl := name(func(s *wire.Spawn) { s.Mode, s.ID = "implement", "1b8c1a55-8f3e-4d0c-9d6e-1f2a3b4c5d6e" })
	other := name(func(s *wire.Spawn) { s.Issue = "DEMO-2" })
	otherTeam := name(func(s *wire.Spawn) { s.TeamID = "7f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f" })
	lower := name(func(s *wire.Spawn) { s.Issue = "demo-1" })
	if plan != impl {
		t.Errorf("plan's volume %s, implement's %s: want one per issue", plan, impl)
	}
	for _, n := range []string{other, otherTeam, lower} {
		if n == plan {
			t.Errorf("volume %s shared with another issue or team", n)
		}
	}
}

func TestBuildBadQuantity(t *testing.T) {
	target := testTarget()
	target.MemoryLimit = "2 GB"
	_, err := Build(target, testSession())
	if err == nil || !strings.Contains(err.Error(), "kubernetes.memory_limit \"2 GB\"") {
		t.Errorf("err %v: want one naming kubernetes.memory_limit", err)
	}
}

func FuzzSlug(f *testing.F) {
	for _, s := range []string{"DEMO-1", "demo-1", "", "ÄÖ", strings.Repeat("x", 100), "--a--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := Slug(s, 40)
		if len(d) == 0 || len(d) > 40 || strings.Trim(d, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || d[0] == '-' || d[len(d)-1] == '-' {
			t.Errorf("Slug(%q) = %q: not a DNS label of at most 40", s, d)
		}
	})
}

// A session's files are keys of its spec Secret beside spec.json: the
// pod mounts the whole Secret read-only at SpecDir, so each is a file
// there; a bad name or a Secret over 1 MiB is refused, naming it.
func TestBuildFiles(t *testing.T) {
	s := testSession()
	s.Files = map[string][]byte{"legion.toml": []byte("[team.demo]\n"), "a.b-c": {}}
	o, err := Build(testTarget(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{wire.SpecKey: `{"token":"SECRET-TOKEN"}`, "legion.toml": "[team.demo]\n", "a.b-c": ""}
	if len(o.Secret.Data) != len(want) {
		t.Errorf("secret keys %d; want %d", len(o.Secret.Data), len(want))
	}
	for k, v := range want {
		if got, ok := o.Secret.Data[k]; !ok || string(got) != v {
			t.Errorf("secret key %s = %q (present %v); want %q", k, got, ok, v)
		}
	}
	p := o.Job.Spec.Template.Spec
	for i, v := range p.Volumes {
		if v.Secret == nil || v.Secret.SecretName != o.Secret.Name {
			continue
		}
		m := p.Containers[0].VolumeMounts[i]
		if m.Name != v.Name || m.MountPath != SpecDir || !m.ReadOnly || m.SubPath != "" || len(v.Secret.Items) != 0 {
			t.Errorf("spec Secret mounted as %+v from %+v; want all its keys read-only at %s", m, v, SpecDir)
		}
	}

	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"spec.json", map[string][]byte{"spec.json": nil}, `file "spec.json" of its spec Secret: "spec.json" is the spec's own file`},
		{"not a subdomain", map[string][]byte{"..data": nil}, `file "..data" of its spec Secret: want a DNS subdomain`},
		{"capitals", map[string][]byte{"Legion.toml": nil}, `file "Legion.toml"`},
		{"too big", map[string][]byte{"big": make([]byte, 1<<20)}, "its spec and files are 1048600 bytes: a Secret holds at most 1048576"},
	} {
		s := testSession()
		s.Files = tc.files
		if _, err := Build(testTarget(), s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build with files %s = %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// FuzzCheckFileName: a name wire.CheckFileName accepts is a key the API
// server takes in a Secret and a plain file name in SpecDir, never the
// spec's.
func FuzzCheckFileName(f *testing.F) {
	for _, s := range []string{"legion.toml", "spec.json", "..data", "a", "-a", "a..b", "A", strings.Repeat("a", 254)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if wire.CheckFileName(name) != nil {
			return
		}
		if errs := validation.IsConfigMapKey(name); len(errs) > 0 || name == wire.SpecKey || filepath.Base(name) != name || strings.HasPrefix(name, "..") {
			t.Errorf("CheckFileName(%q) = nil; but the API server says %q", name, errs)
		}
	})
}
