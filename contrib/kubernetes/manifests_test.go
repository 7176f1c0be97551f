// Package kubernetes_test checks the manifests a team deploys: that every
// file decodes into the objects client-go knows, that the Role grants
// exactly the verbs Legion uses, that the real API server admits them
// (the controller's pod under Pod Security "restricted"), and what the
// service account may and may not do there.
package kubernetes_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/lease"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// namespace is the manifests' namespace, and shortID the team short id
// their Lease rule names.
const (
	namespace = "legion"
	shortID   = "00000000"
)

// object is one manifest document, with the file it came from.
type object struct {
	file string
	obj  runtime.Object
}

// load decodes every document of every *.yaml file of the directory
// except kustomization.yaml (kustomize's, not the API server's).
func load(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var objs []object
	for _, f := range files {
		if f == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range docs {
			objs = append(objs, object{f, o})
		}
	}
	if len(objs) == 0 {
		t.Fatal("no manifests (*.yaml) in contrib/kubernetes")
	}
	return objs
}

// decode reads the YAML documents of data as objects of client-go's
// scheme; an unknown kind or field is an error.
func decode(data []byte) ([]runtime.Object, error) {
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []runtime.Object
	for i := 1; ; i++ {
		var raw runtime.RawExtension
		err := d.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		obj, _, err := strict.Decode(raw.Raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: expected a Kubernetes object client-go knows: %w", i, err)
		}
		objs = append(objs, obj)
	}
}

// strict decodes into client-go's scheme and refuses unknown and
// duplicate fields, as kubectl's server-side field validation would.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// wantRules is the Role Legion needs: activation/kube's Permissions, then
// controller/lease's Rule, with get and update of the team's Lease only.
func wantRules() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, p := range kube.Permissions {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{res}, Verbs: p.Verbs})
	}
	var create, own []string
	for _, v := range lease.Rule.Verbs {
		if v == "create" { // a create is authorized before the object has a name
			create = append(create, v)
		} else {
			own = append(own, v)
		}
	}
	rules = append(rules,
		rbacv1.PolicyRule{APIGroups: lease.Rule.APIGroups, Resources: lease.Rule.Resources, Verbs: create},
		rbacv1.PolicyRule{APIGroups: lease.Rule.APIGroups, Resources: lease.Rule.Resources, ResourceNames: []string{lease.ControllerName(shortID)}, Verbs: own})
	return rules
}

// TestLeasePermission: what legion doctor checks of the controller's
// Lease (activation/kube.LeasePermission) is what the controller uses
// (controller/lease.Rule), under the same name.
func TestLeasePermission(t *testing.T) {
	p := kube.LeasePermission
	if got := (rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{p.Resource}, Verbs: p.Verbs}); !cmp.Equal(got, lease.Rule) {
		t.Errorf("kube.LeasePermission = %+v; want controller/lease.Rule %+v", got, lease.Rule)
	}
	if got, want := wire.ControllerLease(shortID), lease.ControllerName(shortID); got != want {
		t.Errorf("wire.ControllerLease(%s) = %s; want %s", shortID, got, want)
	}
}

func TestManifests(t *testing.T) {
	objs := load(t)
	var (
		role   *rbacv1.Role
		deploy *appsv1.Deployment
		quota  *corev1.ResourceQuota
		limits *corev1.LimitRange
		state  *corev1.PersistentVolumeClaim
	)
	for _, o := range objs {
		m, err := metaOf(o.obj)
		if err != nil {
			t.Fatalf("%s: %v", o.file, err)
		}
		if _, ns := o.obj.(*corev1.Namespace); !ns && m.GetNamespace() != namespace {
			t.Errorf("%s: %s has namespace %q; want %q (every object namespace-scoped, in the team's namespace)", o.file, m.GetName(), m.GetNamespace(), namespace)
		}
		switch x := o.obj.(type) {
		case *rbacv1.Role:
			role = x
		case *appsv1.Deployment:
			deploy = x
		case *corev1.ResourceQuota:
			quota = x
		case *corev1.LimitRange:
			limits = x
		case *corev1.PersistentVolumeClaim:
			state = x
		case *corev1.Namespace, *corev1.ServiceAccount, *rbacv1.RoleBinding:
		default:
			t.Errorf("%s: a %T; want only Namespace, ServiceAccount, Role, RoleBinding, ResourceQuota, LimitRange, PersistentVolumeClaim and Deployment (nothing cluster-scoped but the namespace)", o.file, o.obj)
		}
	}
	if role == nil || deploy == nil || quota == nil || limits == nil || state == nil {
		t.Fatal("the manifests hold no Role, Deployment, ResourceQuota, LimitRange or PersistentVolumeClaim (the controller's state)")
	}
	if diff := cmp.Diff(wantRules(), role.Rules); diff != "" {
		t.Errorf("role.yaml: rules differ from activation/kube.Permissions and controller/lease.Rule (-want +got):\n%s", diff)
	}
	checkDeployment(t, deploy)
	checkQuota(t, quota, limits, deploy, state)
	checkState(t, deploy, state)
}

// checkState: the controller's state directory (XDG_STATE_HOME, its
// dispatch records) is the claim of state.yaml, kept across its pods.
func checkState(t *testing.T, d *appsv1.Deployment, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	p := d.Spec.Template.Spec
	c := p.Containers[0]
	var stateDir string
	for _, e := range c.Env {
		if e.Name == "XDG_STATE_HOME" {
			stateDir = e.Value
		}
	}
	for _, m := range c.VolumeMounts {
		for _, v := range p.Volumes {
			if v.Name == m.Name && m.MountPath == stateDir && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
				return
			}
		}
	}
	t.Errorf("controller.yaml: XDG_STATE_HOME %q is not the mount of claim %s (state.yaml); want the controller's dispatch records kept across its pods", stateDir, pvc.Name)
}

// sessionsInQuota is how many sessions at legion.toml's defaults, with
// the controller's pod, quota.yaml is sized for.
const sessionsInQuota = 10

// checkQuota: the quota limits every figure of a team's namespace, and
// sessionsInQuota sessions at legion.toml's defaults (their pods as
// activation/kube.Build makes them, the LimitRange's defaults filling
// what they leave unset) and the controller fit in it, as do as many
// issue volumes, five times over.
func checkQuota(t *testing.T, q *corev1.ResourceQuota, lr *corev1.LimitRange, d *appsv1.Deployment, state *corev1.PersistentVolumeClaim) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
		corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage} {
		if _, ok := q.Spec.Hard[r]; !ok {
			t.Errorf("quota.yaml: no %s in the ResourceQuota; want every figure of the team's namespace bounded", r)
		}
	}
	if len(lr.Spec.Limits) != 1 || lr.Spec.Limits[0].Type != corev1.LimitTypeContainer {
		t.Fatalf("quota.yaml: LimitRange %+v; want one item of type Container", lr.Spec.Limits)
	}
	withDefaults := func(r corev1.ResourceRequirements) corev1.ResourceRequirements {
		r = *r.DeepCopy()
		for _, l := range []struct{ list, def corev1.ResourceList }{{r.Requests, lr.Spec.Limits[0].DefaultRequest}, {r.Limits, lr.Spec.Limits[0].Default}} {
			for k, v := range l.def {
				if _, ok := l.list[k]; !ok {
					l.list[k] = v
				}
			}
		}
		return r
	}
	team := config.DefaultTeam()
	team.Engine, team.ID = config.EngineKubernetes, uuid.MustParse("6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f")
	team.Kubernetes.Namespace, team.Kubernetes.Image = namespace, "registry.example/legion-worker:1"
	objs, err := kube.Build(*team.KubeTarget(), wire.Spawn{ID: uuid.NewString(), Name: "DEMO-1-plan", TeamID: team.ID.String(), Issue: "DEMO-1", Mode: "plan", StartLimitBurst: 1})
	if err != nil {
		t.Fatal(err)
	}
	session := withDefaults(objs.Job.Spec.Template.Spec.Containers[0].Resources)
	controller := withDefaults(d.Spec.Template.Spec.Containers[0].Resources)
	used := corev1.ResourceList{}
	add := func(k corev1.ResourceName, q resource.Quantity, n int64) {
		sum := used[k]
		for range n {
			sum.Add(q)
		}
		used[k] = sum
	}
	for _, p := range []struct {
		r corev1.ResourceRequirements
		n int64
	}{{session, sessionsInQuota}, {controller, 1}} {
		add(corev1.ResourcePods, resource.MustParse("1"), p.n)
		add(corev1.ResourceRequestsCPU, p.r.Requests[corev1.ResourceCPU], p.n)
		add(corev1.ResourceRequestsMemory, p.r.Requests[corev1.ResourceMemory], p.n)
		add(corev1.ResourceLimitsCPU, p.r.Limits[corev1.ResourceCPU], p.n)
		add(corev1.ResourceLimitsMemory, p.r.Limits[corev1.ResourceMemory], p.n)
	}
	add(corev1.ResourcePersistentVolumeClaims, resource.MustParse("1"), 5*sessionsInQuota+1)
	add(corev1.ResourceRequestsStorage, objs.Volume.Spec.Resources.Requests[corev1.ResourceStorage], 5*sessionsInQuota)
	add(corev1.ResourceRequestsStorage, state.Spec.Resources.Requests[corev1.ResourceStorage], 1)
	for k, u := range used {
		if hard := q.Spec.Hard[k]; hard.Cmp(u) < 0 {
			t.Errorf("quota.yaml: %s = %s; %d sessions at legion.toml's defaults, the controller (and its state) and %d volumes need %s", k, hard.String(), sessionsInQuota, 5*sessionsInQuota, u.String())
		}
	}
}

// checkDeployment checks the controller's Deployment: one replica,
// replaced by Recreate, its pod hardened.
func checkDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if r := ptr.Deref(d.Spec.Replicas, 1); r != 1 {
		t.Errorf("controller.yaml: replicas = %d; want 1", r)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("controller.yaml: strategy %q; want Recreate", d.Spec.Strategy.Type)
	}
	p := d.Spec.Template.Spec
	if p.ServiceAccountName != "legion" || !ptr.Deref(p.AutomountServiceAccountToken, false) {
		t.Errorf("controller.yaml: service account %q, automount %v; want legion, true (the controller needs its token)", p.ServiceAccountName, p.AutomountServiceAccountToken)
	}
	if p.SecurityContext == nil || !ptr.Deref(p.SecurityContext.RunAsNonRoot, false) || p.SecurityContext.SeccompProfile == nil || p.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("controller.yaml: pod securityContext %+v; want runAsNonRoot and seccomp RuntimeDefault", p.SecurityContext)
	}
	if len(p.Containers) != 1 {
		t.Fatalf("controller.yaml: %d containers; want 1", len(p.Containers))
	}
	c := p.Containers[0]
	for _, c := range append(slices.Clone(p.InitContainers), p.Containers...) {
		sc := c.SecurityContext
		if sc == nil || ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("controller.yaml: container %s securityContext %+v; want no privilege escalation, a read-only root, all capabilities dropped", c.Name, sc)
		}
	}
	if len(p.InitContainers) != 1 || len(p.InitContainers[0].Command) < 3 || !slices.Equal(p.InitContainers[0].Command[:3], []string{"legion", "worktree", "clone"}) {
		t.Errorf("controller.yaml: init containers %+v; want one, legion worktree clone (the workspace the controller reads)", p.InitContainers)
	}
	if want := []string{"legion-kube", "lead", "--namespace", "legion", "--name", "legion-controller-00000000", "--", "legion", "controller", "TEAM", "--with-helper"}; !slices.Equal(c.Command, want) {
		t.Errorf("controller.yaml: command %q; want %q (the controller, with a helper of its own, only while holding its Lease)", c.Command, want)
	}
	pod := false
	for _, e := range c.Env {
		pod = pod || e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}
	if !pod {
		t.Error("controller.yaml: no POD_NAME from metadata.name (the Lease's holder identity)")
	}
}

// applyOrder ranks an object in the order it must be created.
func applyOrder(obj runtime.Object) int {
	switch obj.(type) {
	case *corev1.Namespace:
		return 0
	case *corev1.ServiceAccount:
		return 1
	case *rbacv1.Role:
		return 2
	case *rbacv1.RoleBinding:
		return 3
	case *corev1.ResourceQuota, *corev1.LimitRange:
		return 4
	default:
		return 5
	}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("a %T has no metadata", obj)
	}
	return m, nil
}

// TestManifestsOnTheAPIServer creates every manifest on a real control
// plane and asks it (SubjectAccessReview) what the service account may do.
func TestManifestsOnTheAPIServer(t *testing.T) {
	objs := load(t)
	c := kubetest.Start(t, kubetest.Options{Nodes: 1})
	ctx := t.Context()
	// In the order kubectl apply -k uses: the namespace first.
	slices.SortStableFunc(objs, func(a, b object) int { return applyOrder(a.obj) - applyOrder(b.obj) })
	for _, o := range objs {
		create(t, c, o)
	}

	// The Deployment's pod is admitted under Pod Security "restricted"
	// (namespace.yaml) and within the quota (quota.yaml, its limits
	// defaulted by the LimitRange): the API server itself judges both.
	waitfor.Check(t, 2*time.Minute, "the controller Deployment's pod", func() error {
		pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return nil
		}
		rs, err := c.Client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, r := range rs.Items {
			for _, cond := range r.Status.Conditions {
				if cond.Type == appsv1.ReplicaSetReplicaFailure {
					return waitfor.Stop(fmt.Errorf("ReplicaSet %s cannot create the pod: %s", r.Name, cond.Message))
				}
			}
		}
		return errors.New("no pod yet")
	})

	sa := "system:serviceaccount:" + namespace + ":legion"
	allowed := func(ns, group, resource, sub, verb, name string) bool {
		t.Helper()
		r, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: group, Resource: resource, Subresource: sub, Verb: verb, Name: name,
			},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, p := range kube.Permissions {
		for _, v := range p.Verbs {
			if !allowed(namespace, p.Group, p.Resource, p.Subresource, v, "") {
				t.Errorf("%s may not %s %s (%s); kube.Permissions needs it", sa, v, p.Resource, p.Why)
			}
		}
	}
	own := lease.ControllerName(shortID)
	for _, v := range lease.Rule.Verbs {
		name := own
		if v == "create" {
			name = ""
		}
		if !allowed(namespace, "coordination.k8s.io", "leases", "", v, name) {
			t.Errorf("%s may not %s lease %q; the controller's Lease needs it", sa, v, name)
		}
	}
	denied := []struct{ ns, group, resource, sub, verb, name string }{
		{namespace, "", "pods", "", "delete", ""},
		{namespace, "", "pods", "", "create", ""},
		{namespace, "", "pods", "attach", "create", ""},
		{namespace, "", "pods", "portforward", "create", ""},
		{namespace, "", "secrets", "", "get", ""},
		{namespace, "", "secrets", "", "list", ""},
		{namespace, "", "secrets", "", "delete", ""},
		{namespace, "", "persistentvolumeclaims", "", "delete", ""},
		{namespace, "", "events", "", "create", ""},
		{namespace, "", "events", "", "delete", ""},
		{namespace, "", "resourcequotas", "", "update", ""},
		{namespace, "", "configmaps", "", "update", ""},
		{namespace, "apps", "deployments", "", "create", ""},
		{namespace, "apps", "deployments", "", "update", ""},
		{namespace, "batch", "jobs", "", "update", ""},
		{namespace, "rbac.authorization.k8s.io", "roles", "", "update", ""},
		{namespace, "rbac.authorization.k8s.io", "rolebindings", "", "create", ""},
		{namespace, "coordination.k8s.io", "leases", "", "update", lease.ControllerName("ffffffff")},
		{namespace, "coordination.k8s.io", "leases", "", "delete", own},
		{namespace, "coordination.k8s.io", "leases", "", "list", ""},
		{"default", "batch", "jobs", "", "create", ""},
		{"default", "coordination.k8s.io", "leases", "", "create", ""},
		{"", "", "nodes", "", "list", ""},
		{"", "", "namespaces", "", "create", ""},
		{"", "", "persistentvolumes", "", "create", ""},
		{"", "rbac.authorization.k8s.io", "clusterroles", "", "create", ""},
		{"", "rbac.authorization.k8s.io", "clusterrolebindings", "", "create", ""},
	}
	for _, d := range denied {
		if allowed(d.ns, d.group, d.resource, d.sub, d.verb, d.name) {
			what := d.resource
			if d.sub != "" {
				what += "/" + d.sub
			}
			if d.name != "" {
				what += " " + d.name
			}
			t.Errorf("%s may %s %s in namespace %q; want it refused", sa, d.verb, what, d.ns)
		}
	}
}

// create creates the object o of a manifest on c, as kubectl apply would.
func create(t *testing.T, c *kubetest.Cluster, o object) {
	t.Helper()
	ctx := t.Context()
	var err error
	switch x := o.obj.(type) {
	case *corev1.Namespace:
		_, err = c.Client.CoreV1().Namespaces().Create(ctx, x, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = c.Client.CoreV1().ServiceAccounts(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = c.Client.RbacV1().Roles(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		_, err = c.Client.RbacV1().RoleBindings(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *corev1.ResourceQuota:
		_, err = c.Client.CoreV1().ResourceQuotas(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *corev1.LimitRange:
		_, err = c.Client.CoreV1().LimitRanges(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *corev1.PersistentVolumeClaim:
		_, err = c.Client.CoreV1().PersistentVolumeClaims(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *appsv1.Deployment:
		// The quota admits pods once its controller has computed its
		// use; until then the API server refuses them.
		waitfor.Check(t, time.Minute, "the quota computed", func() error {
			qs, err := c.Client.CoreV1().ResourceQuotas(x.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, q := range qs.Items {
				if len(q.Status.Hard) == 0 {
					return fmt.Errorf("quota %s has no status yet", q.Name)
				}
			}
			return nil
		})
		_, err = c.Client.AppsV1().Deployments(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	default:
		t.Fatalf("%s: no way to create a %T", o.file, o.obj)
	}
	if err != nil {
		t.Fatalf("%s: create: %v", o.file, err)
	}
}
