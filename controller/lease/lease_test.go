package lease_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/legion-dev/legion/controller/lease"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// patience bounds every wait on the cluster: generous for 2 shared cores,
// and far below the hour-long leases of the tests that must see a release.
const patience = 2 * time.Minute

// The child process of TestLease/KilledLeaderReplacedAfterLeaseDuration:
// it leads the Lease the environment names, says "leading" on stdout and
// holds it until it is killed.
const childEnv = "LEGION_LEASE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("LEASE_KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = lease.Run(context.Background(), lease.Options{
		Config: cfg, Namespace: "default", Name: os.Getenv("LEASE_NAME"), Identity: os.Getenv("LEASE_ID"),
		LeaseDuration: 5 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second,
	}, func(ctx context.Context) error {
		fmt.Println("leading")
		<-ctx.Done()
		return nil
	})
	fmt.Fprintln(os.Stderr, "lease.Run returned:", err)
	return 1
}

func TestOptionsRefused(t *testing.T) {
	cfg := &kubetestlessConfig
	tests := []struct {
		name string
		o    lease.Options
	}{
		{"no config", lease.Options{Namespace: "ns", Name: "n"}},
		{"no name", lease.Options{Config: cfg, Namespace: "ns"}},
		{"no namespace", lease.Options{Config: cfg, Name: "n"}},
		{"fractional lease", lease.Options{Config: cfg, Namespace: "ns", Name: "n", LeaseDuration: 1500 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}},
		{"renew not shorter", lease.Options{Config: cfg, Namespace: "ns", Name: "n", LeaseDuration: 5 * time.Second, RenewDeadline: 5 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			err := lease.Run(t.Context(), tt.o, func(context.Context) error { called = true; return nil })
			if err == nil || called {
				t.Errorf("Run(%+v) = %v, lead called %v; want an error and no lead", tt.o, err, called)
			}
		})
	}
}

func TestLease(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1})
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := func(name, id string, leaseDuration time.Duration) lease.Options {
		return lease.Options{
			Config: c.Config, Namespace: "default", Name: name, Identity: id,
			LeaseDuration: leaseDuration, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second,
			Log: log.With("elector", id),
		}
	}

	// Two electors take turns, each stepping down by ending its Run's
	// context and then taking a while to return from lead (as a tick in
	// flight would): the one that takes over must never find the other
	// still leading. A release before lead returned fails this.
	t.Run("OneLeaderAtATime", func(t *testing.T) {
		const turns = 4
		var (
			leading atomic.Bool
			led     atomic.Int32
			mu      sync.Mutex
			bad     []string
			wg      sync.WaitGroup
		)
		turnTaken := make(chan struct{}, turns*2)
		for _, id := range []string{"a", "b"} {
			wg.Go(func() {
				for led.Load() < turns {
					before := led.Load()
					ctx, stepDown := context.WithCancel(t.Context())
					err := lease.Run(ctx, opts("one-at-a-time", id, 15*time.Second), func(lctx context.Context) error {
						if !leading.CompareAndSwap(false, true) {
							mu.Lock()
							bad = append(bad, id+" started leading while the other still led")
							mu.Unlock()
						}
						led.Add(1)
						turnTaken <- struct{}{}
						stepDown()
						<-lctx.Done()
						// Shutdown work after the context ended: three
						// retry periods, in which a waiting elector would
						// take a released Lease.
						time.Sleep(3 * time.Second)
						leading.Store(false)
						return nil
					})
					if err != nil {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("Run(%s) = %v; want nil", id, err))
						mu.Unlock()
						return
					}
					stepDown()
					// Let the other take its turn before campaigning again.
					waitUntil(func() bool { return led.Load() > before+1 || led.Load() >= turns })
				}
			})
		}
		for range turns {
			select {
			case <-turnTaken:
			case <-time.After(patience):
				t.Fatalf("after %v, %d of %d turns were taken", patience, led.Load(), turns)
			}
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Errorf("two leaders at once: %q", bad)
		}
	})

	// With an hour-long lease, a second elector can take over within the
	// test only if the first released the Lease when its context ended.
	t.Run("ReleaseOnCancelHandsOver", func(t *testing.T) {
		first := startElector(t, opts("release", "first", time.Hour))
		first.waitLeading(t)
		second := startElector(t, opts("release", "second", time.Hour))
		first.stop(t)
		l, err := c.Client.CoordinationV1().Leases("default").Get(t.Context(), "release", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" && h != "second" {
			t.Errorf("after the first elector's Run returned, the Lease's holder = %q; want released (\"\") or taken by second", h)
		}
		second.waitLeading(t)
		second.stop(t)
	})

	// Another holder written into the Lease (as a partitioned leader finds
	// when it comes back) ends lead; Run campaigns again and leads once
	// that holder releases.
	t.Run("LostLeaseCancelsLead", func(t *testing.T) {
		e := startElector(t, opts("lost", "victim", 15*time.Second))
		e.waitLeading(t)
		leases := c.Client.CoordinationV1().Leases("default")
		setLease(t, leases, "lost", func(s *coordv1.LeaseSpec) {
			now := metav1.NewMicroTime(time.Now())
			s.HolderIdentity, s.LeaseDurationSeconds, s.RenewTime = ptr.To("thief"), ptr.To[int32](3600), &now
		})
		e.waitStopped(t)
		select {
		case err := <-e.done:
			t.Fatalf("Run returned %v after losing the lease; want it to campaign again", err)
		default:
		}
		if n := e.leads.Load(); n != 1 {
			t.Fatalf("lead ran %d times while the thief held the Lease; want 1", n)
		}
		l, err := leases.Get(t.Context(), "lost", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "thief" {
			t.Fatalf("the Lease's holder = %q after the victim lost it; want thief (a lost lease is not released)", h)
		}
		setLease(t, leases, "lost", func(s *coordv1.LeaseSpec) {
			s.HolderIdentity, s.LeaseDurationSeconds = nil, ptr.To[int32](1)
		})
		e.waitLeading(t)
		e.stop(t)
	})

	// A leader process killed with SIGKILL cannot release: a waiting
	// elector takes the Lease, and not before LeaseDuration after the
	// dead leader's last renewal (both times as the Lease records them).
	t.Run("KilledLeaderReplacedAfterLeaseDuration", func(t *testing.T) {
		const name, leaseDuration = "killed", 5 * time.Second
		w, err := c.Client.CoordinationV1().Leases("default").Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var (
			seen    []coordv1.LeaseSpec
			watched = make(chan struct{})
		)
		go func() { // ends with w.Stop
			defer close(watched)
			for ev := range w.ResultChan() {
				if l, ok := ev.Object.(*coordv1.Lease); ok && ev.Type != watch.Error {
					seen = append(seen, l.Spec)
				}
			}
		}()

		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", "LEASE_KUBECONFIG="+c.Kubeconfig, "LEASE_NAME="+name, "LEASE_ID=child")
		cmd.Stderr = testWriter{t}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed := false
		t.Cleanup(func() {
			if !killed {
				cmd.Process.Kill() // the child this test started, by its PID
				cmd.Wait()
			}
		})
		said := make(chan string, 1)
		go func() { // ends when the child's stdout closes
			line, _ := bufio.NewReader(out).ReadString('\n')
			said <- line
			io.Copy(io.Discard, out)
		}()
		select {
		case line := <-said:
			if line != "leading\n" {
				t.Fatalf("the child said %q; want leading", line)
			}
		case <-time.After(patience):
			t.Fatalf("the child did not lead within %v", patience)
		}

		o := opts(name, "heir", leaseDuration)
		o.RenewDeadline, o.RetryPeriod = 3*time.Second, time.Second
		heir := startElector(t, o)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed = true
		if err := cmd.Wait(); err == nil {
			t.Fatal("the killed child exited 0")
		}
		heir.waitLeading(t)
		heir.stop(t)
		w.Stop()
		<-watched

		var lastRenew, acquired *metav1.MicroTime
		for _, s := range seen {
			switch ptr.Deref(s.HolderIdentity, "") {
			case "child":
				if acquired != nil {
					t.Fatalf("the child renewed after the heir acquired: %+v", seen)
				}
				lastRenew = s.RenewTime
			case "heir":
				if acquired == nil {
					acquired = s.AcquireTime
				}
			}
		}
		if lastRenew == nil || acquired == nil {
			t.Fatalf("the watch saw no renewal by the child or no acquisition by the heir: %+v", seen)
		}
		if gap := acquired.Sub(lastRenew.Time); gap < leaseDuration {
			t.Errorf("the heir acquired %v after the killed child's last renewal; want at least the lease duration %v", gap, leaseDuration)
		}
	})
}

// setLease changes the Lease as another client would, reading it again
// when the elector's renewal came in between.
func setLease(t *testing.T, leases coordclient.LeaseInterface, name string, change func(*coordv1.LeaseSpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&l.Spec)
		_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update Lease %s: %v", name, err)
	}
}

// elector is one lease.Run in a goroutine of the test, with what its lead
// saw.
type elector struct {
	cancel  context.CancelFunc
	done    chan error    // Run's result
	started chan struct{} // a send per lead started
	ended   chan struct{} // a send per lead ended
	leads   atomic.Int32
}

// startElector runs lease.Run(o) until stop or the end of the test.
func startElector(t *testing.T, o lease.Options) *elector {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	e := &elector{cancel: cancel, done: make(chan error, 1), started: make(chan struct{}, 8), ended: make(chan struct{}, 8)}
	go func() { // ends with ctx
		e.done <- lease.Run(ctx, o, func(ctx context.Context) error {
			e.leads.Add(1)
			e.started <- struct{}{}
			<-ctx.Done()
			e.ended <- struct{}{}
			return ctx.Err()
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-e.done
	})
	return e
}

func (e *elector) waitLeading(t *testing.T) {
	t.Helper()
	select {
	case <-e.started:
	case err := <-e.done:
		t.Fatalf("Run returned %v before leading", err)
	case <-time.After(patience):
		t.Fatalf("not leading after %v", patience)
	}
}

func (e *elector) waitStopped(t *testing.T) {
	t.Helper()
	select {
	case <-e.ended:
	case <-time.After(patience):
		t.Fatalf("lead still running %v after the lease was taken", patience)
	}
}

// stop ends Run's context and checks it returns nil.
func (e *elector) stop(t *testing.T) {
	t.Helper()
	e.cancel()
	select {
	case err := <-e.done:
		e.done <- err // for the cleanup
		if err != nil {
			t.Errorf("Run = %v after its context ended; want nil", err)
		}
	case <-time.After(patience):
		t.Fatalf("Run did not return within %v of its context ending", patience)
	}
}

// waitUntil waits for cond, at most patience; the caller checks what
// it waited for.
func waitUntil(cond func() bool) {
	waitfor.Until(patience, "a condition", func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// kubetestlessConfig reaches no API server: Options are refused before
// any request.
var kubetestlessConfig = rest.Config{Host: "https://127.0.0.1:1"}

// testWriter writes a child's stderr and the electors' log to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
