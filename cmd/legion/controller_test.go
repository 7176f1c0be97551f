package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/lease"
	"github.com/legion-dev/legion/internal/kubetest"
)

// A controller of a team with engine "kubernetes" runs its loop only as
// the holder of legion-controller-<short> in the team's namespace, reached
// through the team's kubeconfig and context outside a pod, and releases it
// when the loop returns.
func TestLeadingHoldsTheTeamsLease(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1})
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod: the team's kubeconfig
	tm := config.Team{
		Name: "lease-team", ID: uuid.New(), Engine: config.EngineKubernetes,
		Kubernetes: config.Kubernetes{Kubeconfig: c.Kubeconfig, Context: kubetest.Context, Namespace: "default", Image: "example.test/legion:dev"},
	}
	name := "legion-controller-" + tm.ShortID()
	leases := c.Client.CoordinationV1().Leases("default")
	errDone := errors.New("the loop's own error")
	var holder string
	err := leading(t.Context(), tm, slog.New(slog.DiscardHandler), func(ctx context.Context) error {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		return errDone
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("leading(kubernetes) = %v; want the loop's error", err)
	}
	if want := lease.Identity(); holder != want {
		t.Errorf("while the loop ran, Lease %s's holder = %q; want %q", name, holder, want)
	}
	l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("after the loop returned, Lease %s's holder = %q; want released", name, h)
	}

	tm.Engine = config.EngineSystemd
	ran := false
	if err := leading(t.Context(), tm, slog.New(slog.DiscardHandler), func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("leading(systemd) = %v, ran %v; want nil, ran without a Lease", err, ran)
	}
}
