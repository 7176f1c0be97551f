package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
)

// Labels and annotations on every object Legion makes. Label values must
// be short DNS-ish words, so the raw names (an issue's identifier, a
// team's name) travel as annotations and the labels carry ids.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "legion"
	LabelTeamID    = "legion.dev/team-id"
	LabelSession   = "legion.dev/session"
	LabelMode      = "legion.dev/mode"
	LabelIssue     = "legion.dev/issue" // a slug of the issue; the annotation has it whole

	AnnotName  = "legion.dev/name"
	AnnotTeam  = "legion.dev/team"
	AnnotIssue = "legion.dev/issue"
	AnnotUnit  = "legion.dev/unit"
	AnnotHooks = "legion.dev/hooks" // "true" when the worker reads the agent's hooks
)

// Paths and names are package wire's (the helper uses them too).
const (
	VolumeMount = wire.VolumeMount
	StateDir    = wire.StateDir
	HomeDir     = wire.HomeDir
	WorkDir     = wire.WorkDir
	RuntimeDir  = wire.RuntimeDir
	SpecDir     = wire.SpecDir
	SpecFile    = wire.SpecFile
	SecretsDir  = wire.SecretsDir

	containerName = "worker"
	// ExitCannotStart is the worker's exit code for an agent that cannot
	// be started (proto: its program is missing): the Job fails for good.
	ExitCannotStart = 78
	// runAs is the worker image's user and group (not root).
	runAs = 1000
	// maxSecret is the most a Secret holds (the API server refuses more):
	// the spec and the session's files together.
	maxSecret = 1 << 20
)

// JobName and SecretName name a session's Job and its spec's Secret.
var (
	JobName    = wire.JobName
	SecretName = wire.SecretName
)

// VolumeName is the name of the volume of one issue of a team (or, for a
// session with no issue, of that session's name): every phase of the
// issue mounts it, so a new pod resumes the same conversation.
func VolumeName(teamID, issue string) string {
	return "legion-" + teamID[:8] + "-" + Slug(issue, 63-len("legion-")-9)
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Slug is s as a DNS label of at most n bytes: lower case, other runes as
// '-'; when that loses anything, a hash of s keeps distinct names apart.
func Slug(s string, n int) string {
	d := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if d == s && len(d) <= n && d != "" {
		return d
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:4])
	if len(d) > n-len(h)-1 {
		d = strings.TrimRight(d[:n-len(h)-1], "-")
	}
	if d == "" {
		return h
	}
	return d + "-" + h
}

func labels(s wire.Spawn) map[string]string {
	l := map[string]string{
		LabelManagedBy: ManagedBy,
		LabelTeamID:    s.TeamID,
		LabelSession:   s.ID,
		LabelMode:      Slug(s.Mode, 63),
	}
	if s.Issue != "" {
		l[LabelIssue] = Slug(s.Issue, 63)
	}
	return l
}

func annotations(s wire.Spawn) map[string]string {
	a := map[string]string{AnnotName: s.Name, AnnotTeam: s.Team, AnnotIssue: s.Issue, AnnotUnit: s.Unit}
	if s.Hooks {
		a[AnnotHooks] = "true"
	}
	return a
}

// Objects are what a session is on a cluster.
type Objects struct {
	Volume *corev1.PersistentVolumeClaim // the issue's; created once, kept when the session ends
	Job    *batchv1.Job
	Secret *corev1.Secret // the spec; owned by the Job, so it goes with it
}

// Build returns the objects of session s on target t. Bad quantities in
// t are errors naming the legion.toml key.
func Build(t api.KubeTarget, s wire.Spawn) (Objects, error) {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		key, val string
		list     corev1.ResourceList
		name     corev1.ResourceName
	}{
		{"cpu_request", t.CPURequest, res.Requests, corev1.ResourceCPU},
		{"memory_request", t.MemoryRequest, res.Requests, corev1.ResourceMemory},
		{"cpu_limit", t.CPULimit, res.Limits, corev1.ResourceCPU},
		{"memory_limit", t.MemoryLimit, res.Limits, corev1.ResourceMemory},
	} {
		if q.val == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.val)
		if err != nil {
			return Objects{}, fmt.Errorf("kubernetes.%s %q: want a Kubernetes quantity such as \"500m\" or \"2Gi\": %v", q.key, q.val, err)
		}
		q.list[q.name] = v
	}
	storage, err := resource.ParseQuantity(t.Storage)
	if err != nil {
		return Objects{}, fmt.Errorf("kubernetes.storage %q: want a Kubernetes quantity such as \"10Gi\": %v", t.Storage, err)
	}
	if s.StartLimitBurst < 1 {
		return Objects{}, fmt.Errorf("session %s: start limit burst %d: want at least 1", s.Name, s.StartLimitBurst)
	}
	data := map[string][]byte{wire.SpecKey: s.Spec}
	size := len(s.Spec)
	for name, b := range s.Files {
		if err := wire.CheckFileName(name); err != nil {
			return Objects{}, fmt.Errorf("session %s: file %q of its spec Secret: %v", s.Name, name, err)
		}
		data[name] = b
		size += len(b)
	}
	if size > maxSecret {
		return Objects{}, fmt.Errorf("session %s: its spec and files are %d bytes: a Secret holds at most %d", s.Name, size, maxSecret)
	}
	volName := VolumeName(s.TeamID, s.Issue)
	if s.Issue == "" {
		volName = VolumeName(s.TeamID, s.Name)
	}
	vol := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: volName, Namespace: t.Namespace,
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelTeamID: s.TeamID},
			Annotations: map[string]string{AnnotTeam: s.Team, AnnotIssue: s.Issue},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: storage}},
		},
	}
	if s.Issue != "" {
		vol.Labels[LabelIssue] = Slug(s.Issue, 63)
	}
	if t.StorageClass != "" {
		vol.Spec.StorageClassName = &t.StorageClass
	}

	no, yes := false, true
	uid := int64(runAs)
	secretMode := int32(0o440) // root:fsGroup; proto.ReadSpec accepts a root-owned spec others cannot read
	volumes := []corev1.Volume{
		{Name: "issue", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: volName}}},
		{Name: "spec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SecretName(s.ID), DefaultMode: &secretMode}}},
		{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "issue", MountPath: VolumeMount},
		{Name: "spec", MountPath: SpecDir, ReadOnly: true},
		{Name: "run", MountPath: RuntimeDir},
		{Name: "tmp", MountPath: "/tmp"},
	}
	if t.SecretName != "" {
		volumes = append(volumes, corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: t.SecretName, DefaultMode: &secretMode}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "secrets", MountPath: SecretsDir, ReadOnly: true})
	}
	env := []corev1.EnvVar{
		{Name: "HOME", Value: HomeDir},
		{Name: "LEGION_ENGINE", Value: api.EngineKubernetes},
		{Name: wire.EnvSpec, Value: SpecFile},
	}
	if s.Socket != "" {
		env = append(env, corev1.EnvVar{Name: wire.EnvSocket, Value: s.Socket})
	}
	backoff := int32(s.StartLimitBurst - 1)
	replaceFailed := batchv1.Failed
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: JobName(s.ID), Namespace: t.Namespace, Labels: labels(s), Annotations: annotations(s)},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			// A new pod only once the old one is gone: never two workers
			// of one session on one volume.
			PodReplacementPolicy: &replaceFailed,
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr(containerName), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{ExitCannotStart}}},
				// A drained or lost node is not the agent's failure: the
				// pod is replaced without counting against the limit.
				{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
					{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(s), Annotations: annotations(s)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: &no, // the agent has no business with the API server
					EnableServiceLinks:           &no,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Volumes: volumes,
					Containers: []corev1.Container{{
						Name:         containerName,
						Image:        t.Image,
						Command:      []string{"legion-pty-worker", "--spec", SpecFile},
						Env:          env,
						WorkingDir:   VolumeMount,
						Resources:    res,
						VolumeMounts: mounts,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no,
							Privileged:               &no,
							ReadOnlyRootFilesystem:   &yes,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(s.ID), Namespace: t.Namespace, Labels: labels(s)},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
		Immutable:  &yes,
	}
	return Objects{Volume: vol, Job: job, Secret: secret}, nil
}

func ptr[T any](v T) *T { return &v }
