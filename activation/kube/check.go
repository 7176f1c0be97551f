package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
)

// Permission is what the helper's user must be allowed in a team's
// namespace (a Role; the README's Kubernetes section lists them).
type Permission struct {
	Group, Resource, Subresource string
	Verbs                        []string
	Why                          string
}

// Permissions are every verb the Kubernetes engine uses, and nothing more.
var Permissions = []Permission{
	{Group: "batch", Resource: "jobs", Verbs: []string{"create", "get", "list", "watch", "delete"}, Why: "a Job per session"},
	{Resource: "pods", Verbs: []string{"get", "list", "watch"}, Why: "where each session runs, how its runs ended"},
	{Resource: "pods", Subresource: "exec", Verbs: []string{"create"}, Why: "attach and input (legion-pty-worker --connect in the pod)"},
	{Resource: "secrets", Verbs: []string{"create"}, Why: "each session's spec, which holds its control token"},
	{Resource: "persistentvolumeclaims", Verbs: []string{"create"}, Why: "a volume per issue"},
	{Resource: "events", Verbs: []string{"list", "watch"}, Why: "why a Job has no pod: the Job controller's FailedCreate (a quota refused it)"},
}

// LeasePermission is what a team's controller needs of its Lease,
// wherever it runs (controller/lease.Rule; contrib/kubernetes's test holds
// the two equal): create it the first time, get and update it (its name
// only) to acquire, renew and release it.
var LeasePermission = Permission{Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get", "create", "update"},
	Why: "the controller's Lease: two controllers of a team never decide at once"}

// clusterTimeout bounds each request of the cluster's check.
const clusterTimeout = 5 * time.Second

// Check checks req's target as the helper will use it and returns a
// wire.Report, bounded in time (a few seconds when nothing answers):
//   - the cluster: the kubeconfig and context, the API server reachable,
//     the namespace, every verb of Permissions (SelfSubjectAccessReview),
//     the storage class;
//   - the image, asked of its registry with this machine's Docker
//     credentials (CheckImage), while the cluster is checked;
//   - with req.Lease, the verbs of LeasePermission on that Lease for the
//     kubeconfig's user (a controller run with this kubeconfig holds it)
//     and, when readable, who holds it now.
func Check(ctx context.Context, req wire.CheckRequest) wire.Report {
	image := make(chan wire.Finding, 1)
	go func() { image <- checkImage(ctx, req.Image) }() // ends within ImageTimeout
	var r wire.Report
	c, cluster := checkCluster(ctx, req.KubeTarget)
	r.Findings = append(r.Findings, cluster)
	r.Findings = append(r.Findings, <-image)
	if req.Lease != "" {
		if c == nil {
			r.Findings = append(r.Findings, wire.Finding{Name: wire.FindingLease, Status: wire.StatusFail,
				Detail: "not checked: the cluster cannot be reached", Fix: "fix the cluster's problem first"})
		} else {
			r.Findings = append(r.Findings, checkLease(ctx, c, req.Namespace, req.Lease))
		}
	}
	return r
}

// checkImage is the image's Finding.
func checkImage(ctx context.Context, image string) wire.Finding {
	f := wire.Finding{Name: wire.FindingImage}
	digest, err := CheckImage(ctx, image, ImageTimeout)
	var ie *ImageError
	switch {
	case err == nil:
		f.Status, f.Detail = wire.StatusOK, fmt.Sprintf("image %s is in its registry (%s)", image, digest)
	case errors.As(err, &ie) && ie.Problem == ImageInvalid:
		f.Status, f.Detail, f.Fix = wire.StatusFail, err.Error(), "fix kubernetes.image: want a reference such as registry.example/legion-worker:1.0"
	case errors.As(err, &ie) && ie.Problem == ImageMissing:
		f.Status, f.Detail = wire.StatusFail, err.Error()
		f.Fix = "push the worker image there (contrib/kubernetes/README.md, The worker image), or fix kubernetes.image; " +
			"ignore this only if the image is loaded on every node and never pulled"
	case errors.As(err, &ie) && ie.Problem == ImageDenied:
		f.Status, f.Detail = wire.StatusWarn, err.Error()
		f.Fix = "nodes pull with the pull secrets of the namespace's default service account, which doctor does not read: " +
			"check that one names credentials for this registry, or log in here (docker login, crane auth login) to check"
	default:
		f.Status, f.Detail = wire.StatusWarn, err.Error()
		f.Fix = "nodes pull over their own network: check that they reach this registry, or fix kubernetes.image"
	}
	return f
}

// checkCluster is the cluster's Finding, and a client when the API server
// answered.
func checkCluster(ctx context.Context, t api.KubeTarget) (kubernetes.Interface, wire.Finding) {
	f := wire.Finding{Name: wire.FindingCluster, Status: wire.StatusFail}
	c, found, err := clusterOf(ctx, t)
	if err != nil {
		f.Detail = err.Error()
		f.Fix = "fix the team's kubernetes.* keys in legion.toml, or the cluster, as the message says"
		return c, f
	}
	f.Status, f.Detail = wire.StatusOK, found
	return c, f
}

func clusterOf(ctx context.Context, t api.KubeTarget) (kubernetes.Interface, string, error) {
	cfg, err := Config(t)
	if err != nil {
		return nil, "", err
	}
	cfg.Timeout = clusterTimeout
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	v, err := c.Discovery().ServerVersion()
	if err != nil {
		return nil, "", fmt.Errorf("cannot reach the API server %s (context %q): %w", cfg.Host, t.Context, err)
	}
	found := []string{fmt.Sprintf("Kubernetes %s at %s", v.GitVersion, cfg.Host)}
	if _, err := c.CoreV1().Namespaces().Get(ctx, t.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return c, "", fmt.Errorf("namespace %s does not exist: create it (kubectl create namespace %s) or fix kubernetes.namespace", t.Namespace, t.Namespace)
	} else if err == nil {
		found = append(found, "namespace "+t.Namespace)
	}
	var denied []string
	for _, p := range Permissions {
		for _, verb := range p.Verbs {
			ok, err := allowed(ctx, c, t.Namespace, p, verb, "")
			if err != nil {
				return c, "", err
			}
			if !ok {
				res := p.Resource
				if p.Subresource != "" {
					res += "/" + p.Subresource
				}
				denied = append(denied, verb+" "+res)
			}
		}
	}
	if len(denied) > 0 {
		return c, "", fmt.Errorf("the kubeconfig's user may not %s in namespace %s: bind it a Role with the verbs the README's Kubernetes RBAC lists", strings.Join(denied, ", "), t.Namespace)
	}
	found = append(found, "RBAC allows every verb")
	classes, err := c.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		found = append(found, "storage classes not readable (not needed to run; the issue volumes' claims show a wrong class)")
	case err != nil:
		return c, "", fmt.Errorf("list storage classes: %w", err)
	default:
		var names []string
		def := ""
		for _, sc := range classes.Items {
			names = append(names, sc.Name)
			if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
				def = sc.Name
			}
		}
		slices.Sort(names)
		switch {
		case t.StorageClass != "" && !slices.Contains(names, t.StorageClass):
			return c, "", fmt.Errorf("storage class %s does not exist (the cluster has: %s): fix kubernetes.storage_class", t.StorageClass, strings.Join(names, ", "))
		case t.StorageClass == "" && def == "":
			return c, "", fmt.Errorf("kubernetes.storage_class is unset and the cluster has no default storage class (it has: %s): set kubernetes.storage_class", strings.Join(names, ", "))
		case t.StorageClass == "":
			found = append(found, "default storage class "+def)
		default:
			found = append(found, "storage class "+t.StorageClass)
		}
	}
	return c, strings.Join(found, "; "), nil
}

// allowed asks the API server whether the kubeconfig's user may verb p's
// resource (named name, "" for any) in namespace ns.
func allowed(ctx context.Context, c kubernetes.Interface, ns string, p Permission, verb, name string) (bool, error) {
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Name: name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("ask the API server what the kubeconfig's user may do: %w", err)
	}
	return r.Status.Allowed, nil
}

// checkLease is the Lease's Finding: may the kubeconfig's user create
// leases and get and update lease name in namespace ns, and who holds it.
func checkLease(ctx context.Context, c kubernetes.Interface, ns, name string) wire.Finding {
	f := wire.Finding{Name: wire.FindingLease, Status: wire.StatusFail}
	var denied []string
	for _, verb := range LeasePermission.Verbs {
		obj := name
		if verb == "create" { // authorized before the object has a name
			obj = ""
		}
		ok, err := allowed(ctx, c, ns, LeasePermission, verb, obj)
		if err != nil {
			f.Detail = err.Error()
			return f
		}
		if !ok && obj == "" {
			denied = append(denied, verb+" leases")
		} else if !ok {
			denied = append(denied, verb+" lease "+obj)
		}
	}
	if len(denied) > 0 {
		f.Detail = fmt.Sprintf("the kubeconfig's user may not %s in namespace %s: a controller run with this kubeconfig cannot hold the team's Lease", strings.Join(denied, ", "), ns)
		f.Fix = fmt.Sprintf("grant it create on leases and get, update on lease %s (coordination.k8s.io; contrib/kubernetes/role.yaml's last two rules)", name)
		return f
	}
	f.Status = wire.StatusOK
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		f.Detail = fmt.Sprintf("the kubeconfig's user may hold Lease %s; no controller has taken it yet", name)
	case err != nil:
		f.Detail = fmt.Sprintf("the kubeconfig's user may hold Lease %s; reading it: %v", name, err)
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		f.Detail = fmt.Sprintf("the kubeconfig's user may hold Lease %s; nobody holds it now", name)
	default:
		f.Detail = fmt.Sprintf("the kubeconfig's user may hold Lease %s; %s holds it", name, *l.Spec.HolderIdentity)
		if l.Spec.RenewTime != nil {
			f.Detail += ", renewed " + l.Spec.RenewTime.UTC().Format(time.RFC3339)
		}
	}
	return f
}
