// Package lease runs a function only while this process holds a team's
// coordination.k8s.io Lease, so that of several `legion controller TEAM`
// replicas (a Deployment's pods, or a pod and a user's machine) one
// decides at a time. It uses client-go's tools/leaderelection with a
// LeaseLock.
//
// What Run guarantees:
//
//   - lead runs only after this process has written itself into the Lease
//     as its holder, and at most one lead of one Run runs at a time: Run
//     campaigns again only after lead has returned.
//   - When the process stops renewing (the API server unreachable for
//     RenewDeadline, or another holder written by someone else), lead's
//     context is cancelled.
//   - When Run's context ends while leading, the Lease is renewed until lead
//     has returned, and only then released (its holder cleared, its
//     duration 1s), so a waiting replica takes over at once but never while
//     lead still runs. A process that dies without releasing (SIGKILL, a
//     lost node) is replaced only after LeaseDuration.
//
// What it cannot guarantee: a lease is a promise in time, not a fence.
// Candidates judge expiry by their own clocks from when they saw the Lease
// last change, so clock offsets do not matter, but clock rates do: after a
// lost renewal lead's context is cancelled at RenewDeadline, and others may
// take over at LeaseDuration, so lead must return within LeaseDuration −
// RenewDeadline (5s by default) of its context ending, and a process frozen
// (stopped, swapped out) longer than that may still act once after waking.
// Work that must never run twice needs its own fence (the helper's
// admission of spawns, the tracker's state).
//
// It owns the Lease named by Options and nothing else: it never deletes the
// Lease, never touches another object, and never runs lead after ctx ended.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/legion-dev/legion/activation/kube/wire"
)

// Default durations, those of Kubernetes' own controllers.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Rule is the RBAC rule Run needs in the Lease's namespace: it reads the
// Lease, creates it when missing, and updates it to acquire, renew and
// release. It never lists, watches or deletes.
var Rule = rbacv1.PolicyRule{
	APIGroups: []string{"coordination.k8s.io"},
	Resources: []string{"leases"},
	Verbs:     []string{"get", "create", "update"},
}

// ControllerName is the name of the Lease that `legion controller TEAM`
// holds in the team's namespace: legion-controller-<short>, short being the
// team's short id (config.Team.ShortID).
func ControllerName(short string) string { return wire.ControllerLease(short) }

// Options says which Lease Run holds, as whom, and how long.
type Options struct {
	// Config reaches the API server (rest.InClusterConfig in a pod).
	Config *rest.Config
	// Namespace and Name are the Lease's.
	Namespace, Name string
	// Identity is written into the Lease as its holder; "" means
	// Identity(). Two processes must never share one.
	Identity string
	// LeaseDuration is how long others wait, after they last saw the
	// Lease change, before taking it; RenewDeadline how long the holder
	// tries to renew before giving up (it must be shorter); RetryPeriod
	// the time between tries. Zero means the defaults. LeaseDuration is
	// written in whole seconds, so it must be one.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Log receives the elections' events; nil discards them.
	Log *slog.Logger
}

// Identity is this process's holder identity: $POD_NAME when set (the
// manifests set it from the downward API), else the host name and the
// process id.
func Identity() string {
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return pod
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + "_" + strconv.Itoa(os.Getpid())
}

// Run campaigns for the Lease and runs lead while holding it, until ctx
// ends. Losing the Lease cancels lead's context, and Run campaigns again
// once lead has returned (whatever it returned: it is logged). When lead
// returns for any other reason (ctx ended, or on its own while leading),
// Run releases the Lease and returns lead's error, nil for
// context.Canceled; it returns nil when ctx ends before it leads. Any
// other error is a bad Options, returned before campaigning.
func Run(ctx context.Context, o Options, lead func(ctx context.Context) error) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	client, err := coordinationv1.NewForConfig(o.Config)
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", o.Namespace, o.Name, err)
	}
	for ctx.Err() == nil {
		t, err := term(ctx, o, client, lead)
		if err != nil {
			return err
		}
		switch {
		case t.lost:
			o.Log.Warn("lost the lease; campaigning again", "err", t.leadErr)
		case t.led && ctx.Err() == nil:
			if errors.Is(t.leadErr, context.Canceled) {
				return nil
			}
			return t.leadErr
		case t.led && !errors.Is(t.leadErr, context.Canceled):
			return t.leadErr
		}
	}
	return nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Config == nil {
		return o, errors.New("lease: Options.Config is nil")
	}
	if o.Namespace == "" || o.Name == "" {
		return o, fmt.Errorf("lease: namespace %q and name %q must both be set", o.Namespace, o.Name)
	}
	if o.Identity == "" {
		o.Identity = Identity()
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.LeaseDuration%time.Second != 0 {
		return o, fmt.Errorf("lease %s/%s: lease duration %v is not whole seconds (a Lease holds seconds)", o.Namespace, o.Name, o.LeaseDuration)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Log = o.Log.With("lease", o.Namespace+"/"+o.Name, "identity", o.Identity)
	return o, nil
}

// termResult is how one term of the elector ended.
type termResult struct {
	led     bool  // lead ran (or was due to run: acquired as ctx ended)
	lost    bool  // the elector stopped renewing while ctx was alive
	leadErr error // what lead returned
}

// term runs one elector until it stops: ctx ends before it acquires, or
// it acquires, lead runs, and either lead returns or renewal fails. It
// returns only after lead has returned and the Lease, if still ours, was
// released.
func term(ctx context.Context, o Options, client coordinationv1.CoordinationV1Interface, lead func(context.Context) error) (termResult, error) {
	lock := &writeLock{LeaseLock: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
	}}
	// The elector's context is not ctx: once leading, it must keep
	// renewing until lead has returned, even when ctx has ended.
	logger := logr.FromSlogHandler(quietCancel{o.Log.Handler()})
	electCtx, stopElect := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer stopElect()
	var (
		mu       sync.Mutex
		leading  bool
		res      termResult
		leadDone = make(chan struct{})
	)
	// Before leading, ctx ending stops the campaign.
	stopCampaign := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !leading {
			stopElect()
		}
	})
	defer stopCampaign()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          o.Name,
		LeaseDuration: o.LeaseDuration,
		RenewDeadline: o.RenewDeadline,
		RetryPeriod:   o.RetryPeriod,
		// Released by term itself, after lead has returned: the library
		// releases as soon as renewing stops, while lead may still run.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			// renewing is electCtx until renewal fails or stopElect.
			OnStartedLeading: func(renewing context.Context) {
				defer close(leadDone)
				defer stopElect() // lead returned: stop renewing, then release
				mu.Lock()
				leading = true
				mu.Unlock()
				res.led = true
				if ctx.Err() != nil {
					return // acquired just as ctx ended: release at once
				}
				o.Log.Info("leading")
				lctx, cancel := context.WithCancel(renewing)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				res.leadErr = lead(lctx)
				res.lost = renewing.Err() != nil && ctx.Err() == nil
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != o.Identity {
					o.Log.Info("following", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return res, fmt.Errorf("lease %s/%s: %w", o.Namespace, o.Name, err)
	}
	le.Run(electCtx)
	// A successful write of the Lease means acquire succeeded, so the
	// elector started OnStartedLeading (in a goroutine of its own): wait
	// for it.
	if lock.wrote.Load() {
		<-leadDone
		release(o, lock)
	}
	return res, nil
}

// release clears the Lease if this process still holds it: the holder
// emptied and the duration 1s, as client-go's ReleaseOnCancel does, so a
// waiting candidate takes it at its next try. The update carries the
// resourceVersion just read, so it never overwrites another holder.
func release(o Options, lock *writeLock) {
	ctx, cancel := context.WithTimeout(context.Background(), o.RenewDeadline)
	defer cancel()
	for {
		rec, _, err := lock.LeaseLock.Get(ctx)
		if err != nil {
			o.Log.Warn("release the lease: read it", "err", err)
			return
		}
		if rec.HolderIdentity != o.Identity {
			return
		}
		now := metav1.NewTime(time.Now())
		err = lock.LeaseLock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions:    rec.LeaderTransitions,
			LeaseDurationSeconds: 1,
			RenewTime:            now,
			AcquireTime:          now,
		})
		if apierrors.IsConflict(err) {
			continue // changed between the read and the write: read again
		}
		if err != nil {
			o.Log.Warn("release the lease; others take it when it expires", "err", err)
			return
		}
		o.Log.Info("released the lease")
		return
	}
}

// writeLock is a LeaseLock that remembers whether it ever wrote the Lease
// with this process as holder: the elector's only synchronous sign that it
// acquired.
type writeLock struct {
	*resourcelock.LeaseLock
	wrote atomic.Bool
}

func (l *writeLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Create(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.wrote.Store(true)
	}
	return err
}

func (l *writeLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Update(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.wrote.Store(true)
	}
	return err
}

// quietCancel passes client-go's election log to a slog handler, at Debug
// for a record whose error is context.Canceled: that is term stopping the
// elector (lead returned), which client-go reports as an error to
// retrieve the Lease.
type quietCancel struct{ slog.Handler }

func (h quietCancel) Handle(ctx context.Context, r slog.Record) error {
	if r.Level <= slog.LevelDebug || !canceled(r) {
		return h.Handler.Handle(ctx, r)
	}
	if !h.Handler.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	d := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool { d.AddAttrs(a); return true })
	return h.Handler.Handle(ctx, d)
}

func (h quietCancel) WithAttrs(as []slog.Attr) slog.Handler {
	return quietCancel{h.Handler.WithAttrs(as)}
}

func (h quietCancel) WithGroup(name string) slog.Handler {
	return quietCancel{h.Handler.WithGroup(name)}
}

// canceled says whether one of r's attributes is an error that is
// context.Canceled.
func canceled(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		err, ok := a.Value.Any().(error)
		found = ok && errors.Is(err, context.Canceled)
		return !found
	})
	return found
}
