package kube

import (
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/legion-dev/legion/activation/api"
)

const (
	teamID    = "6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f"
	sessionID = "0b8c1a55-8f3e-4d0c-9d6e-1f2a3b4c5d6e"
)

func testSession() Session {
	return Session{
		ID: sessionID, Name: "DEMO-1-plan", Team: "demo team", TeamID: teamID, Issue: "DEMO-1", Mode: "plan",
		Unit: "legion-6f1c2e0a-DEMO\\x2d1-plan.service",
		Target: api.KubeTarget{Namespace: "legion-demo", Image: "reg.example/legion-worker:1", Storage: "10Gi",
			CPURequest: "500m", MemoryRequest: "1Gi", MemoryLimit: "2Gi", SecretName: "demo-agents"},
		Spec:            []byte(`{"token":"SECRET-TOKEN"}`),
		StartLimitBurst: 5,
	}
}

func TestBuildHardenedJob(t *testing.T) {
	o, err := Build(testSession())
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
	name := func(mut func(*Session)) string {
		s := testSession()
		mut(&s)
		o, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		if o.Job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != o.Volume.Name {
			t.Fatalf("the pod mounts %s, not the volume %s", o.Job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName, o.Volume.Name)
		}
		return o.Volume.Name
	}
	plan := name(func(*Session) {})
	impl := name(func(s *Session) { s.Mode, s.ID = "implement", "1b8c1a55-8f3e-4d0c-9d6e-1f2a3b4c5d6e" })
	other := name(func(s *Session) { s.Issue = "DEMO-2" })
	otherTeam := name(func(s *Session) { s.TeamID = "7f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f" })
	lower := name(func(s *Session) { s.Issue = "demo-1" })
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
	s := testSession()
	s.Target.MemoryLimit = "2 GB"
	_, err := Build(s)
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
