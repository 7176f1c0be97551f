package kube

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// quotaSession is session name of the test's team, on issue name.
func quotaSession(name string) wire.Spawn {
	return wire.Spawn{
		ID: uuid.NewSHA1(uuid.MustParse(teamID), []byte(name)).String(), Name: name, Team: "demo", TeamID: teamID,
		Issue: name, Mode: "plan", Unit: "legion-6f1c2e0a-" + name + "-plan.service",
		Spec: []byte(`{"token":"x"}`), StartLimitBurst: 3,
	}
}

// waitQuota waits until the resource quota controller has computed quota
// name's use: until then the API server's admission refuses every pod
// the quota covers ("status unknown for quota").
func waitQuota(t *testing.T, c *kubetest.Cluster, ns, name string) {
	t.Helper()
	waitfor.Check(t, time.Minute, "quota "+name+" computed", func() error {
		q, err := c.Client.CoreV1().ResourceQuotas(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(q.Status.Hard) == 0 {
			return errors.New("no status yet")
		}
		return nil
	})
}

// TestQuotaRefused: on a real control plane, a namespace quota of one
// pod and two sessions: the first gets its pod; the Job controller's
// attempt to make the second's is refused by the API server's quota
// admission, and the engine says so in that session's cause (from the Job
// controller's FailedCreate event), announced by a change of the session,
// not only when listed. Once the first session is killed the second's pod
// is made and the cause is gone. A volume the quota refuses fails the
// spawn with an error that says quota, not RBAC.
func TestQuotaRefused(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: 1})
	ctx := t.Context()
	const ns, quota = "legion-demo", "legion"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: quota, Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("1"), corev1.ResourcePersistentVolumeClaims: resource.MustParse("2"),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuota(t, c, ns, quota)
	// Volumes made beforehand (a cluster without a provisioner): the
	// persistent volume controller binds each issue's claim to one.
	immediate := storagev1.VolumeBindingImmediate
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "legion-test"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &immediate,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%d", i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName: "legion-test",
				Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: fmt.Sprintf("/srv/legion-test/quota/%d", i)}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	target := api.KubeTarget{Namespace: ns, Image: "legion-worker:test", StorageClass: "legion-test", Storage: "1Gi", CPURequest: "500m", MemoryRequest: "1Gi", MemoryLimit: "2Gi"}
	var (
		e        *Engine
		mu       sync.Mutex
		causesOf = map[string][]string{} // the causes each change announced
	)
	e, err := New(c.Config, target, func(id string) {
		s, ok := e.Session(id)
		if !ok {
			return
		}
		mu.Lock()
		causesOf[id] = append(causesOf[id], s.Cause)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, ctx); err != nil {
		t.Fatal(err)
	}

	first, second := quotaSession("DEMO-1"), quotaSession("DEMO-2")
	for _, s := range []wire.Spawn{first, second} {
		if started, err := e.Spawn(ctx, s); err != nil || !started {
			t.Fatalf("Spawn(%s) = %v, %v; want started", s.Name, started, err)
		}
		// One at a time: the first takes the quota's one pod.
		waitfor.Check(t, time.Minute, s.Name+"'s pod or its refusal", func() error {
			v, ok := e.Session(s.ID)
			if !ok {
				return errors.New("not listed")
			}
			if v.Cause != "" || len(e.podsOf(s.ID)) > 0 {
				return nil
			}
			return fmt.Errorf("listed as %+v, no pod", v)
		})
		if s.ID != first.ID {
			continue
		}
		waitfor.Check(t, time.Minute, first.Name+" running", func() error {
			if v, _ := e.Session(first.ID); v.State != api.StateRunning || v.Cause != "" || len(e.podsOf(first.ID)) != 1 {
				return fmt.Errorf("%+v with %d pods; want running on its one pod, no cause", v, len(e.podsOf(first.ID)))
			}
			return nil
		})
		// Until the quota controller has counted the first pod, its
		// recount from a cache that lacks it may set the quota's use
		// back to 0, and admission then lets a second pod in (a clean-
		// clone run on busy cores did): the quota's guarantee starts
		// once its use is counted.
		waitfor.Check(t, time.Minute, "the quota's use counted", func() error {
			q, err := c.Client.CoreV1().ResourceQuotas(ns).Get(ctx, quota, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if used := q.Status.Used[corev1.ResourcePods]; used.Value() != 1 {
				return fmt.Errorf("pods used %s", used.String())
			}
			return nil
		})
	}
	v, _ := e.Session(second.ID)
	wantCause := "quota exceeded: pods \"" + JobName(second.ID)
	if v.State != api.StateStarting || !strings.HasPrefix(v.Cause, wantCause) || !strings.Contains(v.Cause, "exceeded quota: "+quota) || len(e.podsOf(second.ID)) != 0 {
		t.Errorf("session %s = %+v with %d pods; want starting, no pod, cause starting %q and naming quota %s", second.Name, v, len(e.podsOf(second.ID)), wantCause, quota)
	}
	waitfor.True(t, time.Minute, "a change of "+second.Name+" that announces the quota", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range causesOf[second.ID] {
			if strings.HasPrefix(c, "quota exceeded: ") {
				return true
			}
		}
		return false
	})

	// A third issue's volume: the quota allows two claims.
	third := quotaSession("DEMO-3")
	_, err = e.Spawn(ctx, third)
	if err == nil || !strings.Contains(err.Error(), "quota exceeded in namespace "+ns+": create persistentvolumeclaims refused") || strings.Contains(err.Error(), "may not") {
		t.Errorf("Spawn(%s) = %v; want the quota on claims named, not RBAC", third.Name, err)
	}

	if err := e.Kill(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	// The Job controller tries again (its backoff) and the pod fits now.
	waitfor.Check(t, 3*time.Minute, second.Name+"'s pod once the quota allows it", func() error {
		v, _ := e.Session(second.ID)
		if n := len(e.podsOf(second.ID)); n != 1 || v.Cause != "" {
			return fmt.Errorf("%d pods, cause %q", n, v.Cause)
		}
		return nil
	})
}

// TestRefusedCause: which FailedCreate events make a cause: the newest
// of this Job's (not a former Job's of the same name) after its newest
// pod; a quota's says "quota exceeded", another refusal says what it was.
func TestRefusedCause(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 29, 18, 0, s, 0, time.UTC)) }
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "legion-x", Namespace: "legion-demo", UID: "job-2"}}
	ev := func(uid types.UID, reason string, s int, msg string) *corev1.Event {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "legion-x", UID: uid}, Reason: reason, LastTimestamp: at(s), Message: msg}
	}
	const quotaMsg = `Error creating: pods "legion-x-abcde" is forbidden: exceeded quota: legion, requested: pods=1, used: pods=1, limited: pods=1`
	const psaMsg = `Error creating: pods "legion-x-abcde" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`
	for _, tc := range []struct {
		name   string
		events []*corev1.Event
		since  int
		want   string
	}{
		{"none", nil, 0, ""},
		{"quota", []*corev1.Event{ev("job-2", "FailedCreate", 5, quotaMsg)}, 0,
			`quota exceeded: pods "legion-x-abcde" is forbidden: exceeded quota: legion, requested: pods=1, used: pods=1, limited: pods=1; the pod starts once sessions end or the operator raises the quota (kubectl describe resourcequota -n legion-demo)`},
		{"another refusal", []*corev1.Event{ev("job-2", "FailedCreate", 5, psaMsg)}, 0,
			`the Job cannot create its pod: pods "legion-x-abcde" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`},
		{"the newest", []*corev1.Event{ev("job-2", "FailedCreate", 9, psaMsg), ev("job-2", "FailedCreate", 5, quotaMsg)}, 0, "the Job cannot create its pod"},
		{"a former Job's", []*corev1.Event{ev("job-1", "FailedCreate", 5, quotaMsg)}, 0, ""},
		{"before the newest pod", []*corev1.Event{ev("job-2", "FailedCreate", 5, quotaMsg)}, 7, ""},
		{"another reason", []*corev1.Event{ev("job-2", "SuccessfulCreate", 5, "Created pod: legion-x-abcde")}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var since time.Time
			if tc.since > 0 {
				since = at(tc.since).Time
			}
			got := refusedCause(job, tc.events, since)
			if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
				t.Errorf("refusedCause = %q; want %q", got, tc.want)
			}
		})
	}
}
