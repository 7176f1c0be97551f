package kube

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSessionOfPodsGone: a finished Job whose pods are gone (a lost
// node's pods are deleted, so are a finished Job's in time) still says
// how its last run ended, from its final condition: a complete Job's
// worker exited 0 at its completion time (the controller counts a phase
// done by that exit), one failed by the pod failure policy exited 78; a
// run that hit the start limit keeps no code. A pod that says how it
// ended wins over the condition.
func TestSessionOfPodsGone(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC))
	job := func(c batchv1.JobCondition) *batchv1.Job {
		c.Status, c.LastTransitionTime = corev1.ConditionTrue, at
		j := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{c}}}
		if c.Type == batchv1.JobComplete {
			j.Status.CompletionTime = &at
		}
		return j
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		code int // -1: none
	}{
		{"complete", job(batchv1.JobCondition{Type: batchv1.JobComplete}), 0},
		{"cannot start", job(batchv1.JobCondition{Type: batchv1.JobFailed, Reason: batchv1.JobReasonPodFailurePolicy}), ExitCannotStart},
		{"start limit", job(batchv1.JobCondition{Type: batchv1.JobFailed, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"}), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SessionOf(tc.job, nil, nil)
			switch {
			case s.Exit == nil:
				t.Fatalf("SessionOf = %+v; want the last run's exit from the Job's condition", s)
			case tc.code < 0 && s.Exit.Code != nil, tc.code >= 0 && (s.Exit.Code == nil || *s.Exit.Code != tc.code):
				t.Errorf("exit %+v; want code %d (-1: none)", s.Exit, tc.code)
			case !s.Exit.Time.Equal(at.Time):
				t.Errorf("exit at %v; want the condition's %v", s.Exit.Time, at.Time)
			}
		})
	}

	// A pod that ended says it, not the condition.
	one := 1
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(one), Reason: "Error"}},
	}}}}
	s := SessionOf(job(batchv1.JobCondition{Type: batchv1.JobFailed, Reason: batchv1.JobReasonBackoffLimitExceeded}), []*corev1.Pod{p}, nil)
	if s.Exit == nil || s.Exit.Code == nil || *s.Exit.Code != 1 {
		t.Errorf("exit %+v; want the pod's code 1", s.Exit)
	}
}
