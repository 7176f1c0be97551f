package kubetest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// describeTimeout bounds the API calls of the description a failed test
// logs: the cluster is still up then, but may be what went wrong.
const describeTimeout = 30 * time.Second

// describeLogLines is how many of a container's last log lines Describe
// shows.
const describeLogLines = 40

// logOnFailure registers the cleanup that logs Describe of every
// namespace but the cluster's own (kube-*) if the test failed. Registered
// after the pod runner's, it runs before the containers are killed and
// the control plane stopped.
func (c *Cluster) logOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), describeTimeout)
		defer cancel()
		nss, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("kubetest: the test failed; list the namespaces to describe them: %v", err)
			return
		}
		for _, ns := range nss.Items {
			if strings.HasPrefix(ns.Name, "kube-") {
				continue
			}
			if d := c.Describe(ctx, ns.Name); d != "" {
				t.Logf("kubetest: the test failed; namespace %s then:\n%s", ns.Name, d)
			}
		}
	})
}

// Describe says what namespace holds, for finding why a pod did not do
// what a test waited for: each Job's status; each claim's phase, volume
// and class, with the persistent volumes of its class; each pod's phase,
// node, conditions and container statuses; for a pod the runner ran
// (Options.RunPods), its container's runc state or exit code and the end
// of its log (the container's output, runc's errors too); and the
// namespace's events, oldest first. It is "" for a namespace with none
// of these; an API call that fails is said in its place.
func (c *Cluster) Describe(ctx context.Context, namespace string) string {
	var b strings.Builder
	jobs, err := c.Client.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list jobs: %v\n", err)
	} else {
		for _, j := range jobs.Items {
			fmt.Fprintf(&b, "job %s: active %d, succeeded %d, failed %d", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed)
			for _, cond := range j.Status.Conditions {
				fmt.Fprintf(&b, "; %s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
			b.WriteString("\n")
		}
	}
	claims, err := c.Client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list claims: %v\n", err)
	} else {
		classes := map[string]bool{}
		for _, pvc := range claims.Items {
			class := ""
			if pvc.Spec.StorageClassName != nil {
				class = *pvc.Spec.StorageClassName
				classes[class] = true
			}
			fmt.Fprintf(&b, "claim %s: %s, volume %q, class %q, made %s\n", pvc.Name, pvc.Status.Phase, pvc.Spec.VolumeName, class, pvc.CreationTimestamp.UTC().Format(time.RFC3339))
		}
		if len(classes) > 0 {
			pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			if err != nil {
				fmt.Fprintf(&b, "list volumes: %v\n", err)
			} else {
				for _, pv := range pvs.Items {
					if !classes[pv.Spec.StorageClassName] {
						continue
					}
					claim := ""
					if ref := pv.Spec.ClaimRef; ref != nil {
						claim = ref.Namespace + "/" + ref.Name
					}
					fmt.Fprintf(&b, "volume %s: %s, claim %q, class %q\n", pv.Name, pv.Status.Phase, claim, pv.Spec.StorageClassName)
				}
			}
		}
	}
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list pods: %v\n", err)
	} else {
		slices.SortFunc(pods.Items, func(x, y corev1.Pod) int { return x.CreationTimestamp.Compare(y.CreationTimestamp.Time) })
		for _, p := range pods.Items {
			c.describePod(&b, &p)
		}
	}
	events, err := c.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list events: %v\n", err)
	} else {
		evs := events.Items
		slices.SortStableFunc(evs, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })
		for _, e := range evs {
			n := ""
			if e.Count > 1 {
				n = fmt.Sprintf(" (%d times)", e.Count)
			}
			fmt.Fprintf(&b, "event %s %s %s/%s %s: %s%s\n", eventTime(e).UTC().Format("15:04:05.000"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, n)
		}
	}
	return b.String()
}

// eventTime is when an event last happened, whichever of its times the
// component that made it set.
func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// describePod writes pod p's part of Describe.
func (c *Cluster) describePod(b *strings.Builder, p *corev1.Pod) {
	fmt.Fprintf(b, "pod %s (uid %s): phase %s, node %q, made %s", p.Name, p.UID, p.Status.Phase, p.Spec.NodeName, p.CreationTimestamp.UTC().Format(time.RFC3339))
	if p.DeletionTimestamp != nil {
		fmt.Fprintf(b, ", being deleted")
	}
	b.WriteString("\n")
	for _, cond := range p.Status.Conditions {
		fmt.Fprintf(b, "  condition %s=%s at %s", cond.Type, cond.Status, cond.LastTransitionTime.UTC().Format(time.RFC3339))
		if cond.Reason != "" || cond.Message != "" {
			fmt.Fprintf(b, " (%s: %s)", cond.Reason, cond.Message)
		}
		b.WriteString("\n")
	}
	for _, st := range p.Status.ContainerStatuses {
		switch s := st.State; {
		case s.Terminated != nil:
			fmt.Fprintf(b, "  container %s: terminated, exit code %d, reason %q, message %q\n", st.Name, s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Message)
		case s.Running != nil:
			fmt.Fprintf(b, "  container %s: running since %s\n", st.Name, s.Running.StartedAt.UTC().Format(time.RFC3339))
		case s.Waiting != nil:
			fmt.Fprintf(b, "  container %s: waiting (%s: %s)\n", st.Name, s.Waiting.Reason, s.Waiting.Message)
		}
	}
	r := c.runner
	if r == nil {
		return
	}
	r.mu.Lock()
	ctr := r.ctrs[types.UID(p.UID)]
	var exited bool
	var code int
	if ctr != nil {
		select {
		case <-ctr.done:
			exited, code = true, ctr.exitCode
		default:
		}
	}
	r.mu.Unlock()
	if ctr == nil {
		fmt.Fprintf(b, "  the pod runner has not run it (it runs a pod once kwok has made it Running)\n")
		return
	}
	if exited {
		fmt.Fprintf(b, "  runc: the container ran %s and exited with code %d\n", ctr.startedAt.UTC().Format("15:04:05.000"), code)
	} else {
		out, err := exec.Command(r.runc, "--root", r.root, "state", ctr.id).CombinedOutput()
		if err != nil {
			fmt.Fprintf(b, "  runc state %s: %v: %s\n", ctr.id, err, strings.TrimSpace(string(out)))
		} else {
			fmt.Fprintf(b, "  runc state: %s\n", strings.Join(strings.Fields(string(out)), " "))
		}
	}
	fmt.Fprintf(b, "  the end of its log (%s):\n", ctr.log)
	for line := range strings.Lines(tail(ctr.log, describeLogLines)) {
		b.WriteString("    " + line)
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
}
