package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EndPod reports that every container of the pod exited with exitCode, as
// a kubelet would: phase Succeeded for 0 and Failed otherwise, each
// container terminated with that exit code, the pod no longer Ready. kwok
// leaves such a pod as it is (no stage matches a finished pod), so the
// controllers see exactly this status.
func (c *Cluster) EndPod(t testing.TB, namespace, name string, exitCode int32) {
	t.Helper()
	reason := "Completed"
	if exitCode != 0 {
		reason = "Error"
	}
	if err := c.endPod(t.Context(), namespace, name, exitCode, reason, ""); err != nil {
		t.Fatal(err)
	}
}

// endPod is EndPod, the container terminated with reason and message.
func (c *Cluster) endPod(ctx context.Context, namespace, name string, exitCode int32, reason, message string) error {
	pod, err := c.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("end pod %s/%s: %w", namespace, name, err)
	}
	phase := corev1.PodSucceeded
	if exitCode != 0 {
		phase = corev1.PodFailed
	}
	now := metav1.Now()
	var statuses []corev1.ContainerStatus
	for _, ctr := range pod.Spec.Containers {
		st := corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, Message: message, StartedAt: now, FinishedAt: now},
		}}
		for _, old := range pod.Status.ContainerStatuses {
			if old.Name == ctr.Name && old.State.Running != nil {
				st.State.Terminated.StartedAt = old.State.Running.StartedAt
				st.RestartCount = old.RestartCount
			}
		}
		statuses = append(statuses, st)
	}
	conditions := []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase":             phase,
		"containerStatuses": statuses,
		"conditions":        conditions,
	}})
	if err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("end pod %s/%s with exit code %d: patch its status: %w", namespace, name, exitCode, err)
	}
	return nil
}

// randomToken is a fresh bearer token for the static token file.
func randomToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux (Go 1.24+ crashes first)
	}
	return hex.EncodeToString(b)
}
