package crbench

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

var shared *batontest.Env

func TestMain(m *testing.M) {
	if os.Getenv(childImplEnv) != "" {
		os.Exit(childMain()) // a re-executed test binary: one replica of BenchmarkCrashFailover
	}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // no benchmark asked for: no API server needed
	}
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(envMain{m}, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*typedDelayingType[...]).waitingLoop"),
		// The event recorders of controller-runtime's own leader election (cr-stock) are
		// not stopped when its manager returns; they are the baseline's, not Baton's.
		goleak.IgnoreAnyFunction("k8s.io/client-go/tools/record.(*eventBroadcasterImpl).StartEventWatcher.func1"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/tools/events.(*eventBroadcasterImpl).startEventWatcher.func1"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/watch.(*Broadcaster).loop"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/tools/events.(*eventBroadcasterImpl).startRecordingEvents.func2"),
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntilWithContext"))
}

type envMain struct{ m *testing.M }

func (e envMain) Run() int {
	env, err := batontest.NewEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared = env
	code := e.m.Run()
	if err := env.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// objects is how many ConfigMaps the controller reconciles.
const objects = 20

type harness struct{ env *batontest.Env }

func newHarness(b *testing.B) *harness {
	b.Helper()
	cs := shared.Clientset()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "bench", metav1.GetOptions{}); err != nil {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for i := range objects {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprint("cm-", i)}}
			if _, err := cs.CoreV1().ConfigMaps("bench").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return &harness{env: shared}
}

// candidate is one replica of one implementation.
type candidate interface {
	start(b *testing.B)
	stop(b *testing.B)
	waitWarm()
	electedAfter(t time.Time) (time.Time, bool)
	reconcileAfter(b *testing.B, from, elected time.Time) (time.Duration, bool)
	requests() int64
	partition() *batontest.Switch
	exited() (error, bool)
	leading() bool
}

// base is what every candidate records.
type base struct {
	part  batontest.Switch
	count atomic.Int64
	cfg   *rest.Config // counted
	lease *rest.Config // counted and partitionable
	run   func(ctx context.Context) error

	cancel context.CancelFunc
	done   chan struct{}

	// mu guards elected, reconciled, err and ended.
	mu         sync.Mutex
	elected    []time.Time
	reconciled []time.Time
	err        error
	ended      bool
}

// roundTripFunc is a function that is an http.RoundTripper, for counting a
// candidate's requests.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func newBase(env *batontest.Env) *base {
	c := &base{done: make(chan struct{})}
	c.cfg = env.Config()
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			c.count.Add(1)
			return rt.RoundTrip(req)
		})
	})
	c.lease = c.part.Wrap(c.cfg)
	return c
}

func (c *base) start(*testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		err := c.run(ctx)
		c.mu.Lock()
		c.err, c.ended = err, true
		c.mu.Unlock()
	}()
}

func (c *base) stop(b *testing.B) {
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.cancel = nil
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		b.Fatal("candidate did not stop")
	}
}

func (c *base) markElected() {
	c.mu.Lock()
	c.elected = append(c.elected, time.Now())
	c.mu.Unlock()
}

func (c *base) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	c.mu.Lock()
	c.reconciled = append(c.reconciled, time.Now())
	c.mu.Unlock()
	return reconcile.Result{}, nil
}

func (c *base) electedAfter(t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.elected {
		if e.After(t) {
			return e, true
		}
	}
	return time.Time{}, false
}

// reconcileAfter waits for the first reconcile after from and returns its time from
// elected.
func (c *base) reconcileAfter(b *testing.B, from, elected time.Time) (time.Duration, bool) {
	var d time.Duration
	batontest.WaitFor(b, 30*time.Second, "the first reconcile", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range c.reconciled {
			if !r.Before(from) {
				d = r.Sub(elected)
				return true
			}
		}
		return false
	})
	return d, true
}

func (c *base) requests() int64              { return c.count.Load() }
func (c *base) partition() *batontest.Switch { return &c.part }
func (c *base) exited() (error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err, c.ended
}

func (h *harness) candidate(b *testing.B, impl, role, lease string, tm timings, release bool) candidate {
	b.Helper()
	id := fmt.Sprintf("%s-%s", lease, role)
	switch impl {
	case implStock:
		return newStock(b, h.env, id, lease, tm, release)
	case implBaton:
		return newBatonCR(b, h.env, id, lease, tm, release)
	default:
		return newBare(b, h.env, id, lease, tm, release)
	}
}

// stock is a manager with controller-runtime's leader election and EnableWarmup.
type stock struct {
	*base
	mgr ctrl.Manager
}

func newStock(b *testing.B, env *batontest.Env, id, lease string, tm timings, release bool) *stock {
	c := &stock{base: newBase(env)}
	// A scheme of its own: with LeaderElectionConfig set, NewManager adds types to the
	// manager's scheme, which would race with the decoding of the other managers'
	// clients on the shared default scheme.
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	mgr, err := ctrl.NewManager(c.cfg, ctrl.Options{
		Scheme:           scheme,
		Metrics:          metricsserver.Options{BindAddress: "0"},
		LeaderElection:   true,
		LeaderElectionID: lease, LeaderElectionNamespace: "default", LeaderElectionConfig: c.lease,
		LeaseDuration: &tm.lease, RenewDeadline: &tm.renew, RetryPeriod: &tm.retry,
		LeaderElectionReleaseOnCancel: release,
	})
	if err != nil {
		b.Fatal(err)
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("bench").For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), EnableWarmup: ptr.To(true)}).
		Complete(c.base)
	if err != nil {
		b.Fatal(err)
	}
	c.mgr = mgr
	c.run = func(ctx context.Context) error {
		go func() {
			select {
			case <-mgr.Elected():
				c.markElected()
			case <-ctx.Done():
			}
		}()
		return mgr.Start(ctx)
	}
	_ = id
	return c
}

func (c *stock) waitWarm() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.mgr.GetCache().WaitForCacheSync(ctx)
}

func (c *stock) leading() bool {
	_, ok := c.electedAfter(time.Time{})
	_, ended := c.exited()
	return ok && !ended
}

// batonCR is a manager without election, with Baton's integration.
type batonCR struct {
	*base
	rt *batoncr.Runtime
}

func newBatonCR(b *testing.B, env *batontest.Env, id, lease string, tm timings, release bool) *batonCR {
	c := &batonCR{base: newBase(env)}
	mgr, err := ctrl.NewManager(c.cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.lease)
	if err != nil {
		b.Fatal(err)
	}
	c.rt, err = batoncr.New(mgr, batoncr.Options{
		LeaderElectionID: lease, LeaderElectionNamespace: "default", Identity: id,
		LeaseDuration: &tm.lease, RenewDeadline: &tm.renew, RetryPeriod: &tm.retry,
		LeaderElectionReleaseOnCancel: &release, Clientset: cs, MetricsRegisterer: prometheus.NewRegistry(),
		Logger: logr.Discard(),
	})
	if err != nil {
		b.Fatal(err)
	}
	err = c.rt.AddController(batoncr.Controller{Name: "bench", Reconciler: c.base,
		Watches: []batoncr.Watch{{Object: &corev1.ConfigMap{}}}})
	if err == nil {
		err = c.rt.AddLeaderOnly("elected", func(ctx context.Context) error {
			c.markElected()
			batoncr.Subscribed(ctx)
			<-ctx.Done()
			return nil
		})
	}
	if err != nil {
		b.Fatal(err)
	}
	c.run = mgr.Start
	return c
}

func (c *batonCR) waitWarm() {
	deadline := time.Now().Add(30 * time.Second)
	for !c.rt.Status().Running && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *batonCR) leading() bool { return c.rt.IsLeader() }

// bare is Baton's elector alone.
type bare struct {
	*base
	el *k8sle.Elector
}

func newBare(b *testing.B, env *batontest.Env, id, lease string, tm timings, release bool) *bare {
	c := &bare{base: newBase(env)}
	cs, err := kubernetes.NewForConfig(c.lease)
	if err != nil {
		b.Fatal(err)
	}
	c.el, err = k8sle.New(k8sle.Config{Identity: id, LeaseName: lease, LeaseNamespace: "default",
		LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry, ReleaseOnCancel: release},
		cs, k8sle.Callbacks{OnStartedLeading: func(ctx context.Context) { c.markElected(); <-ctx.Done() }}, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.run = c.el.Start
	return c
}

func (c *bare) waitWarm() {}

func (c *bare) leading() bool { return c.el.IsLeader() }

func (c *bare) reconcileAfter(*testing.B, time.Time, time.Time) (time.Duration, bool) {
	return 0, false
}
