package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/legion-dev/legion/activation/api"
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
}

// Check checks target t as the helper will use it: the kubeconfig and
// context, the API server reachable, the namespace, every verb of
// Permissions (SelfSubjectAccessReview), and the storage class. It
// returns what it found, or an error saying what to fix. The image is
// not pulled here: a pod that cannot pull it shows the cause in
// `legion sessions list`.
func Check(ctx context.Context, t api.KubeTarget) (string, error) {
	cfg, err := Config(t)
	if err != nil {
		return "", err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := c.Discovery().ServerVersion()
	if err != nil {
		return "", fmt.Errorf("cannot reach the API server %s (context %q): %w", cfg.Host, t.Context, err)
	}
	found := []string{fmt.Sprintf("Kubernetes %s at %s", v.GitVersion, cfg.Host)}
	if _, err := c.CoreV1().Namespaces().Get(ctx, t.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return "", fmt.Errorf("namespace %s does not exist: create it (kubectl create namespace %s) or fix kubernetes.namespace", t.Namespace, t.Namespace)
	} else if err == nil {
		found = append(found, "namespace "+t.Namespace)
	}
	var denied []string
	for _, p := range Permissions {
		for _, verb := range p.Verbs {
			r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: t.Namespace, Verb: verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				return "", fmt.Errorf("ask the API server what the kubeconfig's user may do: %w", err)
			}
			if !r.Status.Allowed {
				res := p.Resource
				if p.Subresource != "" {
					res += "/" + p.Subresource
				}
				denied = append(denied, verb+" "+res)
			}
		}
	}
	if len(denied) > 0 {
		return "", fmt.Errorf("the kubeconfig's user may not %s in namespace %s: bind it a Role with the verbs the README's Kubernetes RBAC lists", strings.Join(denied, ", "), t.Namespace)
	}
	found = append(found, "RBAC allows every verb")
	classes, err := c.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		found = append(found, "storage classes not readable (not needed to run; the issue volumes' claims show a wrong class)")
	case err != nil:
		return "", fmt.Errorf("list storage classes: %w", err)
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
			return "", fmt.Errorf("storage class %s does not exist (the cluster has: %s): fix kubernetes.storage_class", t.StorageClass, strings.Join(names, ", "))
		case t.StorageClass == "" && def == "":
			return "", fmt.Errorf("kubernetes.storage_class is unset and the cluster has no default storage class (it has: %s): set kubernetes.storage_class", strings.Join(names, ", "))
		case t.StorageClass == "":
			found = append(found, "default storage class "+def)
		default:
			found = append(found, "storage class "+t.StorageClass)
		}
	}
	return strings.Join(found, "; "), nil
}
