package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
)

// Config is the client configuration of target: its kubeconfig (file,
// else $KUBECONFIG, else ~/.kube/config) at its context (else the
// current one). An unknown context or a missing file is an error naming
// what to fix.
//
// In a pod (KUBERNETES_SERVICE_HOST set) with no kubeconfig (none in the
// target, none at $KUBECONFIG or ~/.kube/config) it is the pod's service
// account, as client-go's rest.InClusterConfig reads it (its token and
// CA under /var/run/secrets/kubernetes.io/serviceaccount), and the
// target's context is not used: the same legion.toml serves a user's
// machine and the controller's pod.
func Config(t api.KubeTarget) (*rest.Config, error) {
	if t.Kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" && !kubeconfigExists() {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes: in a pod (KUBERNETES_SERVICE_HOST is set) with no kubeconfig: the pod's service account: %w", err)
		}
		return withLimits(cfg), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	where := "$KUBECONFIG or ~/.kube/config"
	if t.Kubeconfig != "" {
		rules.ExplicitPath = t.Kubeconfig
		where = t.Kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("kubernetes: read the kubeconfig (%s): %w", where, err)
	}
	if t.Context != "" {
		if _, ok := raw.Contexts[t.Context]; !ok {
			known := make([]string, 0, len(raw.Contexts))
			for name := range raw.Contexts {
				known = append(known, name)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("kubernetes.context %q: no such context in %s (it has: %s)", t.Context, where, strings.Join(known, ", "))
		}
	} else if raw.CurrentContext == "" {
		return nil, fmt.Errorf("kubernetes.context is empty and %s has no current context: set kubernetes.context in legion.toml", where)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{CurrentContext: t.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes: kubeconfig %s, context %q: %w", where, t.Context, err)
	}
	return withLimits(cfg), nil
}

// withLimits sets Legion's user agent and client-side rate limit on cfg.
func withLimits(cfg *rest.Config) *rest.Config {
	cfg.UserAgent = "legion"
	// client-go's default, 5 requests a second, made each spawn (four
	// requests) wait about a second with 8 at a time; a team's burst of
	// dispatches is what this must carry, as a controller's.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

// kubeconfigExists reports whether a file of $KUBECONFIG (a list), or
// ~/.kube/config without it, exists.
func kubeconfigExists() bool {
	paths := filepath.SplitList(os.Getenv("KUBECONFIG"))
	if len(paths) == 0 {
		paths = []string{DefaultKubeconfig()}
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// DefaultKubeconfig is where Config looks without a file in the target.
func DefaultKubeconfig() string {
	if p := os.Getenv("KUBECONFIG"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".kube", "config")
}

// Engine runs sessions of one target (a cluster's namespace) as Jobs and
// follows them with informers on Legion's Jobs and pods there. Create it
// with New, start it with Start.
type Engine struct {
	Target    api.KubeTarget
	client    kubernetes.Interface
	factories []informers.SharedInformerFactory
	jobs      batchlisters.JobLister
	pods      cache.Indexer // by bySession
	refusals  cache.Indexer // the Job controller's FailedCreate events, by byJob
	synced    []cache.InformerSynced
	stop      context.CancelFunc // ends the informers
}

// refusalSelector selects the events of a Job whose pod the API server
// refused (a quota, an admission policy): the Job controller's
// FailedCreate. Events carry no labels of the Job's, so all the
// namespace's Jobs' are watched; the recorder counts repeats in one event.
const refusalSelector = "involvedObject.kind=Job,reason=FailedCreate"

// New returns the engine of target t, talking to the cluster with cfg.
// onChange, when set, is called with a session's id whenever its Job or
// one of its pods changes (the helper's sessions.watch).
func New(cfg *rest.Config, t api.KubeTarget, onChange func(id string)) (*Engine, error) {
	if t.Namespace == "" {
		return nil, errors.New("kubernetes.namespace is empty: want the team's namespace")
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(c, 10*time.Minute, informers.WithNamespace(t.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelManagedBy + "=" + ManagedBy }))
	ji, pi := f.Batch().V1().Jobs(), f.Core().V1().Pods()
	// Pods indexed by session: a list of n sessions reads each one's
	// pods, not every pod n times (12.8x systemd's list at 1,000 before).
	if err := pi.Informer().AddIndexers(cache.Indexers{bySession: func(o any) ([]string, error) {
		if p, ok := o.(*corev1.Pod); ok && p.Labels[LabelSession] != "" {
			return []string{p.Labels[LabelSession]}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	ef := informers.NewSharedInformerFactoryWithOptions(c, 10*time.Minute, informers.WithNamespace(t.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = refusalSelector }))
	ei := ef.Core().V1().Events()
	if err := ei.Informer().AddIndexers(cache.Indexers{byJob: func(o any) ([]string, error) {
		if ev, ok := o.(*corev1.Event); ok {
			return []string{ev.InvolvedObject.Name}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	e := &Engine{Target: t, client: c, factories: []informers.SharedInformerFactory{f, ef}, jobs: ji.Lister(),
		pods: pi.Informer().GetIndexer(), refusals: ei.Informer().GetIndexer(),
		synced: []cache.InformerSynced{ji.Informer().HasSynced, pi.Informer().HasSynced, ei.Informer().HasSynced}}
	if onChange != nil {
		h := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { notify(o, onChange) },
			UpdateFunc: func(_, o any) { notify(o, onChange) },
			DeleteFunc: func(o any) { notify(o, onChange) },
		}
		if _, err := ji.Informer().AddEventHandler(h); err != nil {
			return nil, err
		}
		if _, err := pi.Informer().AddEventHandler(h); err != nil {
			return nil, err
		}
		// A refusal names the Job, legion-<session id>.
		refused := func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if ev, ok := o.(*corev1.Event); ok {
				if id, ok := strings.CutPrefix(ev.InvolvedObject.Name, JobName("")); ok && id != "" {
					onChange(id)
				}
			}
		}
		if _, err := ei.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: refused, UpdateFunc: func(_, o any) { refused(o) },
		}); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func notify(o any, f func(string)) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if m, ok := o.(metav1.Object); ok {
		if id := m.GetLabels()[LabelSession]; id != "" {
			f(id)
		}
	}
}

// Start starts the informers, which run until life ends, and waits
// until they have listed the namespace once or wait ends.
func (e *Engine) Start(life, wait context.Context) error {
	for _, f := range e.factories {
		f.Start(life.Done())
	}
	if err := e.check(wait); err != nil {
		return err
	}
	if !cache.WaitForCacheSync(wait.Done(), e.synced...) {
		return fmt.Errorf("kubernetes: namespace %s: could not list Legion's jobs and pods: %w", e.Target.Namespace, context.Cause(wait))
	}
	return nil
}

// check asks the API server for the namespace once, so that an unknown
// server, refused credentials or a missing namespace are an error that
// says so instead of informers that retry in silence.
func (e *Engine) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := e.client.CoreV1().Namespaces().Get(ctx, e.Target.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes: namespace %s does not exist: create it (kubectl create namespace %s) or fix kubernetes.namespace", e.Target.Namespace, e.Target.Namespace)
	case apierrors.IsForbidden(err):
		// May not read namespaces: listing jobs is what matters.
		if _, err := e.client.BatchV1().Jobs(e.Target.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return e.explain("list", "jobs", err)
		}
	case err != nil:
		return e.explain("get", "namespaces", err)
	}
	// Refusals are read from events: a user who may not list them would
	// leave the informers waiting in silence.
	if _, err := e.client.CoreV1().Events(e.Target.Namespace).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: refusalSelector}); err != nil {
		return e.explain("list", "events", err)
	}
	return nil
}

// Spawn creates s's objects: the issue's volume unless it exists, the Job,
// and the spec's Secret owned by the Job. started is false when s's Job
// is already there and not finished (a dispatch is idempotent). A
// finished Job of the same session is deleted first, and waited for.
func (e *Engine) Spawn(ctx context.Context, s wire.Spawn) (started bool, err error) {
	objs, err := Build(e.Target, s)
	if err != nil {
		return false, api.Errorf(api.CodeBadRequest, "spawn: %v", err)
	}
	ns := e.Target.Namespace
	jobs := e.client.BatchV1().Jobs(ns)
	old, err := jobs.Get(ctx, objs.Job.Name, metav1.GetOptions{})
	switch {
	case err == nil && !finished(old):
		return false, nil
	case err == nil && s.Reuse && failed(old):
		v := SessionOf(old, nil, nil)
		return false, api.Errorf(api.CodeNotRunning, "spawn: session %s failed on the cluster: %s; it is not started again until a person acts (`legion sessions kill %s`, then dispatch)", s.Name, v.Cause, s.Name)
	case err == nil:
		if err := e.deleteJob(ctx, objs.Job.Name); err != nil {
			return false, err
		}
	case !apierrors.IsNotFound(err):
		return false, e.explain("get", "jobs", err)
	}
	if _, err := e.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, objs.Volume, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, e.explain("create", "persistentvolumeclaims", err)
	}
	job, err := jobs.Create(ctx, objs.Job, metav1.CreateOptions{})
	if err != nil {
		return false, e.explain("create", "jobs", err)
	}
	objs.Secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID}}
	if _, err := e.client.CoreV1().Secrets(ns).Create(ctx, objs.Secret, metav1.CreateOptions{}); err != nil {
		// Without its spec the pod cannot start: take the Job back.
		_ = e.deleteJob(context.WithoutCancel(ctx), job.Name)
		return false, e.explain("create", "secrets", err)
	}
	return true, nil
}

// Kill deletes session id's Job, its pods and its spec; the issue's
// volume stays for the next phase. A session that is not there is not an
// error.
func (e *Engine) Kill(ctx context.Context, id string) error {
	return e.deleteJob(ctx, JobName(id))
}

// TeamStop kills every live session of the team whose id starts with
// short (its 8 hex digits) and returns their names. The Jobs are deleted
// teamStopParallel at a time and then waited for together, in the
// informer's cache: one after the other, each with its own wait, a team
// of 1,001 sessions took longer than the helper waits for an answer.
func (e *Engine) TeamStop(ctx context.Context, short string) ([]string, error) {
	var names, jobs []string
	for _, s := range e.Sessions() {
		if !strings.HasPrefix(e.teamOf(s.ID), short) || s.State.Ended() {
			continue
		}
		names = append(names, s.Name)
		jobs = append(jobs, JobName(s.ID))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(teamStopParallel)
	for _, j := range jobs {
		g.Go(func() error { return e.deleteJobAsync(gctx, j) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := e.waitJobsGone(ctx, jobs, func(name string) bool {
		_, err := e.jobs.Jobs(e.Target.Namespace).Get(name)
		return apierrors.IsNotFound(err)
	}); err != nil {
		return nil, err
	}
	return names, nil
}

// teamStopParallel is how many Job deletions TeamStop has in flight.
const teamStopParallel = 16

func (e *Engine) teamOf(id string) string {
	j, err := e.jobs.Jobs(e.Target.Namespace).Get(JobName(id))
	if err != nil {
		return ""
	}
	return j.Labels[LabelTeamID]
}

func (e *Engine) deleteJob(ctx context.Context, name string) error {
	if err := e.deleteJobAsync(ctx, name); err != nil {
		return err
	}
	jobs := e.client.BatchV1().Jobs(e.Target.Namespace)
	return e.waitJobsGone(ctx, []string{name}, func(name string) bool {
		_, err := jobs.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// deleteJobAsync asks for the Job's deletion, in the foreground: the Job
// is gone once its pods are, so a new pod of the same session never
// shares the volume with the old one (waitJobsGone).
func (e *Engine) deleteJobAsync(ctx context.Context, name string) error {
	fg := metav1.DeletePropagationForeground
	err := e.client.BatchV1().Jobs(e.Target.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return e.explain("delete", "jobs", err)
	}
	return nil
}

// waitJobsGone waits until gone reports each of the Jobs names gone, for
// at most 2 minutes.
func (e *Engine) waitJobsGone(ctx context.Context, names []string, gone func(string) bool) error {
	left := slices.Clone(names)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		left = slices.DeleteFunc(left, gone)
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("kubernetes: %d of %d jobs in %s and their pods are not gone after 2m, e.g. %s (a node that does not answer?): %w",
			len(left), len(names), e.Target.Namespace, left[0], err)
	}
	return nil
}

// explain turns an API error into one that says what to fix.
func (e *Engine) explain(verb, resource string, err error) error {
	ns := e.Target.Namespace
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), quotaRefusal):
		return fmt.Errorf("kubernetes: quota exceeded in namespace %s: %s %s refused: %w; it fits once sessions end, or the operator raises the namespace's ResourceQuota (kubectl describe resourcequota -n %s)", ns, verb, resource, err, ns)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes: the kubeconfig's user may not %s %s in namespace %s: grant it (the README's Kubernetes RBAC lists the verbs): %w", verb, resource, ns, err)
	case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "namespaces"):
		return fmt.Errorf("kubernetes: namespace %s does not exist: create it (kubectl create namespace %s) or fix kubernetes.namespace: %w", ns, ns, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes: the cluster refused the kubeconfig's credentials (context %q): %w", e.Target.Context, err)
	}
	return fmt.Errorf("kubernetes: %s %s in namespace %s: %w", verb, resource, ns, err)
}

// Sessions are the sessions of the engine's namespace, from its informers.
func (e *Engine) Sessions() []api.Session {
	jobs, err := e.jobs.Jobs(e.Target.Namespace).List(k8slabels.Everything())
	if err != nil {
		return nil
	}
	out := make([]api.Session, 0, len(jobs))
	for _, j := range jobs {
		id := j.Labels[LabelSession]
		if id == "" {
			continue
		}
		out = append(out, SessionOf(j, e.podsOf(id), e.refusalsOf(j.Name)))
	}
	slices.SortFunc(out, func(a, b api.Session) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Session is session id as its Job and pods say; ok is false when it has
// no Job.
func (e *Engine) Session(id string) (api.Session, bool) {
	j, err := e.jobs.Jobs(e.Target.Namespace).Get(JobName(id))
	if err != nil {
		return api.Session{}, false
	}
	return SessionOf(j, e.podsOf(id), e.refusalsOf(j.Name)), true
}

// RunningPod is the name of session id's running pod (the newest, if
// the informer still lists one that is going), or "" when none runs.
func (e *Engine) RunningPod(id string) string {
	var best *corev1.Pod
	for _, p := range e.podsOf(id) {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&p.CreationTimestamp) {
			best = p
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// bySession is the index of pods by their session's id; byJob that of
// events by the name of the Job they are about.
const (
	bySession = "session"
	byJob     = "job"
)

func (e *Engine) refusalsOf(job string) []*corev1.Event {
	return indexed[*corev1.Event](e.refusals, byJob, job)
}

func (e *Engine) podsOf(id string) []*corev1.Pod {
	return indexed[*corev1.Pod](e.pods, bySession, id)
}

// indexed are the objects of type T an informer's index lists under key.
func indexed[T any](idx cache.Indexer, index, key string) []T {
	objs, _ := idx.ByIndex(index, key)
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func failed(j *batchv1.Job) bool {
	c, ok := finalCondition(j)
	return ok && (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget)
}

func finished(j *batchv1.Job) bool {
	_, ok := finalCondition(j)
	return ok
}

// finalCondition is the Job's Complete or Failed condition (or the
// FailureTarget the Job controller sets before Failed), if any.
func finalCondition(j *batchv1.Job) (batchv1.JobCondition, bool) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobFailed, batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet:
			return c, true
		}
	}
	return batchv1.JobCondition{}, false
}

// SessionOf is the session that Job j, its pods and the Job controller's
// refusals to create them (FailedCreate events of j) are.
func SessionOf(j *batchv1.Job, pods []*corev1.Pod, refusals []*corev1.Event) api.Session {
	s := api.Session{
		Name: j.Annotations[AnnotName], ID: j.Labels[LabelSession], Unit: j.Annotations[AnnotUnit],
		Team: j.Annotations[AnnotTeam], Issue: j.Annotations[AnnotIssue], Mode: j.Labels[LabelMode],
		Engine: api.EngineKubernetes, Restarts: uint32(max(j.Status.Failed, 0)),
		Hooks: j.Annotations[AnnotHooks] == "true",
	}
	// The newest pod is the session's current run; the newest that ended
	// says how the last run ended.
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var cur *corev1.Pod
	if len(pods) > 0 {
		cur = pods[len(pods)-1]
		s.Node = cur.Spec.NodeName
	}
	for i := len(pods) - 1; i >= 0; i-- {
		if ex := exitOf(pods[i]); ex != nil {
			s.Exit = ex
			break
		}
	}
	if c, ok := finalCondition(j); ok {
		if s.Exit == nil {
			s.Exit = exitOfJob(j, c)
		}
		switch {
		case c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet:
			s.State = api.StateExited
		case c.Reason == batchv1.JobReasonPodFailurePolicy:
			s.State = api.StateFailed
			s.Cause = fmt.Sprintf("the agent cannot be started (the worker exited %d; a restart would not help): see `kubectl logs -n %s job/%s`", ExitCannotStart, j.Namespace, j.Name)
		case c.Reason == batchv1.JobReasonBackoffLimitExceeded:
			s.State = api.StateFailed
			s.Cause = fmt.Sprintf("the start limit hit: %d runs failed", j.Status.Failed)
			if s.Exit != nil && s.Exit.Code != nil {
				s.Cause += fmt.Sprintf(", the last with exit code %d", *s.Exit.Code)
			}
			if s.Exit != nil && s.Exit.Reason != "" {
				s.Cause += " (" + s.Exit.Reason + ")"
			}
		default:
			s.State = api.StateFailed
			s.Cause = fmt.Sprintf("the Job failed: %s: %s", c.Reason, c.Message)
		}
		return s
	}
	switch {
	case cur == nil, cur.DeletionTimestamp != nil, cur.Status.Phase == corev1.PodPending,
		cur.Status.Phase == corev1.PodFailed, cur.Status.Phase == corev1.PodSucceeded:
		// Scheduling, pulling, or waiting for the Job controller's next
		// pod (its backoff).
		s.State = api.StateStarting
		var since time.Time // refusals after the newest pod
		if cur != nil {
			s.Cause = waitingCause(cur)
			since = cur.CreationTimestamp.Time
		}
		if s.Cause == "" && (cur == nil || cur.Status.Phase == corev1.PodFailed || cur.Status.Phase == corev1.PodSucceeded) {
			s.Cause = refusedCause(j, refusals, since)
		}
	default:
		s.State = api.StateRunning
	}
	return s
}

// exitOfJob is how the last run of finished Job j ended, by its final
// condition c, when none of its pods says so any more (a lost node's pods
// are deleted, a finished Job's may be): a complete Job's worker exited
// 0, and one failed by its pod failure policy exited ExitCannotStart (its
// only rule); the code of a run that hit the start limit is not kept.
func exitOfJob(j *batchv1.Job, c batchv1.JobCondition) *api.Exit {
	at := c.LastTransitionTime.Time
	var code int
	switch {
	case c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet:
		if j.Status.CompletionTime != nil {
			at = j.Status.CompletionTime.Time
		}
	case c.Reason == batchv1.JobReasonPodFailurePolicy:
		code = ExitCannotStart
	default:
		return &api.Exit{Time: at, Reason: strings.TrimSpace(c.Reason + " " + firstLine(c.Message))}
	}
	return &api.Exit{Code: &code, Time: at, Reason: "from the Job's condition " + string(c.Type) + " (its pods are gone)"}
}

// exitOf is how pod p's worker ended, nil while it has not.
func exitOf(p *corev1.Pod) *api.Exit {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != containerName || cs.State.Terminated == nil {
			continue
		}
		t := cs.State.Terminated
		code := int(t.ExitCode)
		ex := &api.Exit{Code: &code, Time: t.FinishedAt.Time, Reason: strings.TrimSpace(t.Reason + " " + firstLine(t.Message))}
		return ex
	}
	if p.Status.Phase == corev1.PodFailed {
		// Ended without a container status: evicted, or its node lost.
		return &api.Exit{Time: p.CreationTimestamp.Time, Reason: strings.TrimSpace(p.Status.Reason + " " + firstLine(p.Status.Message))}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// waitingCause says why pod p does not start when a person must act: an
// image that cannot be pulled, a pod no node can take.
func waitingCause(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			return fmt.Sprintf("the image %s cannot be pulled (%s: %s): fix kubernetes.image, or the pull secret of the namespace's service account", cs.Image, w.Reason, firstLine(w.Message))
		case "CreateContainerConfigError", "CreateContainerError":
			return fmt.Sprintf("the pod cannot start its container (%s: %s)", w.Reason, firstLine(w.Message))
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "no node can take the pod: " + firstLine(c.Message)
		}
	}
	return ""
}

// quotaRefusal is what the API server's ResourceQuota admission says when
// an object would exceed a quota ("exceeded quota: NAME, requested: ...").
const quotaRefusal = "exceeded quota"

// refusedCause says why the Job controller could not create j's pod, from
// the newest of j's FailedCreate events seen after since: a namespace
// quota ("quota exceeded: ..."), or another refusal of the API server's
// (Pod Security, a missing service account). "" when there is none: the
// pod is then merely not made yet.
func refusedCause(j *batchv1.Job, refusals []*corev1.Event, since time.Time) string {
	var last *corev1.Event
	var lastAt time.Time
	for _, ev := range refusals {
		if ev.InvolvedObject.UID != j.UID || ev.Reason != "FailedCreate" {
			continue // a Job of the same name before, or another event
		}
		at := eventTime(ev)
		if at.Before(since) || last != nil && !at.After(lastAt) {
			continue
		}
		last, lastAt = ev, at
	}
	if last == nil {
		return ""
	}
	msg := strings.TrimPrefix(firstLine(last.Message), "Error creating: ")
	if strings.Contains(msg, quotaRefusal) {
		return fmt.Sprintf("quota exceeded: %s; the pod starts once sessions end or the operator raises the quota (kubectl describe resourcequota -n %s)", msg, j.Namespace)
	}
	return "the Job cannot create its pod: " + msg
}

// eventTime is when ev last happened: its series' or its last time, else
// when it was first recorded.
func eventTime(ev *corev1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}
