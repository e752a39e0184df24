package controllerruntime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
)

// testTimings are short election timings with headroom for a loaded machine.
var (
	testLease = 3 * time.Second
	testRenew = 2 * time.Second
	testRetry = 400 * time.Millisecond
)

// node is one replica in this process.
type node struct {
	mgr       manager.Manager
	rt        *Runtime
	partition batontest.Switch
	registry  *prometheus.Registry
	cancel    context.CancelFunc
	done      chan error
}

func newNode(t *testing.T, identity, lease string) *node {
	t.Helper()
	return newNodeRelease(t, identity, lease, true)
}

func newNodeRelease(t *testing.T, identity, lease string, release bool) *node {
	t.Helper()
	n := &node{registry: prometheus.NewRegistry(), done: make(chan error, 1)}
	mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(n.partition.Wrap(shared.Config()))
	if err != nil {
		t.Fatal(err)
	}
	n.mgr = mgr
	n.rt, err = New(mgr, Options{
		LeaderElectionID: lease, LeaderElectionNamespace: "default", Identity: identity,
		LeaseDuration: &testLease, RenewDeadline: &testRenew, RetryPeriod: &testRetry,
		LeaderElectionReleaseOnCancel: &release, Clientset: cs, MetricsRegisterer: n.registry,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- n.mgr.Start(ctx) }()
	t.Cleanup(func() { n.stop(t) })
}

func (n *node) stop(t *testing.T) {
	t.Helper()
	if n.cancel == nil {
		return
	}
	n.cancel()
	n.cancel = nil
	select {
	case err := <-n.done:
		if err != nil {
			t.Errorf("manager returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("manager did not stop")
	}
}

// recorder is a Reconciler that records the term of every call, and the context
// of the last.
type recorder struct {
	mu    sync.Mutex
	terms []uint64
	other int // calls without a term
	last  context.Context
}

func (r *recorder) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	term, ok := termctx.FromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok {
		r.other++
	}
	r.terms = append(r.terms, term)
	r.last = ctx
	return reconcile.Result{}, nil
}

func (r *recorder) sawTerm(term uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.terms {
		if t == term {
			return true
		}
	}
	return false
}

// TestRuntimeCampaignsAgainAfterLosingTheLease: a replica whose lease client is cut off
// loses its term by its own clock, stops its controller, keeps its manager running,
// and once connected again leads a new term whose rebuilt controller reconciles with
// the new term in its context.
func TestRuntimeCampaignsAgainAfterLosingTheLease(t *testing.T) {
	n := newNode(t, "solo", "recampaign")
	rec := &recorder{}
	if err := n.rt.AddController(Controller{Name: "rec", Reconciler: rec, Watches: []Watch{{Object: &corev1.ConfigMap{}}}}); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	var term1 uint64
	batontest.WaitFor(t, 30*time.Second, "the first term", func() bool { term1 = n.rt.Term(); return term1 != 0 })
	batontest.WaitFor(t, 30*time.Second, "a reconcile in the first term", func() bool { return rec.sawTerm(term1) })
	if err := n.rt.readyz(nil); err != nil {
		t.Fatalf("readyz after the first reconcile: %v", err)
	}

	rec.mu.Lock()
	reconcile1 := rec.last
	rec.mu.Unlock()

	n.partition.Cut()
	batontest.WaitFor(t, 30*time.Second, "the term to end", func() bool { return !n.rt.IsLeader() })
	// A write from the first term's reconcile now fails saying why its term ended.
	if err := TermEnded(reconcile1); !errors.Is(err, ErrTermEnded) || !errors.Is(err, lifecycle.ErrLeadershipLost) {
		t.Errorf("TermEnded of the first term's reconcile: %v, want ErrTermEnded wrapping lifecycle.ErrLeadershipLost", err)
	}
	// Between terms the next term's controller is built, its sources running.
	comp := n.rt.controllers[0]
	batontest.WaitFor(t, 30*time.Second, "the next term's controller to be warm", func() bool {
		comp.mu.Lock()
		defer comp.mu.Unlock()
		return comp.next != nil
	})
	n.partition.Heal()
	var term2 uint64
	batontest.WaitFor(t, 30*time.Second, "a second term", func() bool { term2 = n.rt.Term(); return term2 > term1 })
	batontest.WaitFor(t, 30*time.Second, "a reconcile in the second term", func() bool { return rec.sawTerm(term2) })
	select {
	case err := <-n.done:
		t.Fatalf("manager exited after losing the lease: %v", err)
	default:
	}
	rec.mu.Lock()
	other := rec.other
	rec.mu.Unlock()
	if other != 0 {
		t.Fatalf("%d reconciles had no term in their context", other)
	}
	st := n.rt.Status()
	if st.Terms < 2 {
		t.Fatalf("status counts %d terms, want 2", st.Terms)
	}
	if err := n.rt.healthz(nil); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	assertMetric(t, n.registry, "baton_is_leader", 1)
	assertMetric(t, n.registry, "baton_leadership_transitions_total", float64(st.Terms))
}

func assertMetric(t *testing.T, g prometheus.Gatherer, name string, want float64) {
	t.Helper()
	if got := metricValue(t, g, name); got != want {
		t.Fatalf("%s = %v, want %v", name, got, want)
	}
}

// metricValue returns the value of the gauge or counter name (its first series).
func metricValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// stateEvent is the state an all-replica runnable computes.
type stateEvent struct {
	value string
	at    time.Time
}

func (*stateEvent) EventType() string      { return "test.state" }
func (e *stateEvent) Timestamp() time.Time { return e.at }

// TestStateHandedToTheNewLeader: the follower computes state while it follows, with
// no leader-only subscriber; when the leader stops, the follower's leader-only
// function receives that state at once, through its StateReplayer.
func TestStateHandedToTheNewLeader(t *testing.T) {
	received := make(chan string, 4)
	nodes := make([]*node, 2)
	replayers := make([]*leadership.StateReplayer[*stateEvent], 2)
	for i, id := range []string{"a", "b"} {
		n := newNode(t, id, "handover")
		replayers[i] = leadership.NewStateReplayer[*stateEvent](n.rt.Bus())
		if err := n.rt.AddReplayer("state", replayers[i]); err != nil {
			t.Fatal(err)
		}
		err := n.rt.AddLeaderOnly("writer", func(ctx context.Context) error {
			ch := busevents.Subscribe[*stateEvent](ctx, n.rt.Bus(), "writer", 4)
			Subscribed(ctx)
			for {
				select {
				case <-ctx.Done():
					return nil
				case ev, ok := <-ch:
					if !ok {
						return nil // the term ended
					}
					if id == "b" {
						received <- ev.value
					}
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	nodes[0].start(t)
	batontest.WaitFor(t, 30*time.Second, "a to lead", nodes[0].rt.IsLeader)
	nodes[1].start(t)
	batontest.WaitFor(t, 30*time.Second, "b to see a", func() bool { return nodes[1].rt.GetLeader() == "a" })
	// The all-replica side of b computes state while b follows.
	ev := &stateEvent{value: "computed while following", at: time.Now()}
	nodes[1].rt.Bus().Publish(ev)
	replayers[1].Cache(ev)

	nodes[0].stop(t) // graceful: releases the lease
	select {
	case v := <-received:
		if v != ev.value {
			t.Fatalf("new leader received %q, want %q", v, ev.value)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the new leader's writer received no state")
	}
	if !nodes[1].rt.IsLeader() {
		t.Fatal("b received the state but does not lead")
	}
}

func TestNewAndRegistrationErrors(t *testing.T) {
	mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	ok := Options{LeaderElectionID: "x", LeaderElectionNamespace: "default", Identity: "same", MetricsRegisterer: prometheus.NewRegistry()}
	bad := func(mod func(*Options), field string) {
		t.Helper()
		o := ok
		o.MetricsRegisterer = prometheus.NewRegistry()
		mod(&o)
		_, err := New(mgr, o)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), field) {
			t.Errorf("New with bad %s: %v, want ErrInvalidOptions naming it", field, err)
		}
	}
	neg := -time.Second
	short := time.Second
	bad(func(o *Options) { o.LeaderElectionNamespace = "" }, "LeaderElectionNamespace")
	bad(func(o *Options) { o.GracefulShutdownTimeout = &neg }, "GracefulShutdownTimeout")
	bad(func(o *Options) { o.LeaseDuration = &short }, "lease duration")
	if _, err := New(nil, ok); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(nil): %v", err)
	}

	rt, err := New(mgr, ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(mgr, ok); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "MetricsRegisterer") {
		t.Errorf("a second Runtime on one registry: %v, want ErrInvalidOptions naming MetricsRegisterer", err)
	}
	rec := &recorder{}
	watch := []Watch{{Object: &corev1.ConfigMap{}}}
	for name, err := range map[string]error{
		"nil reconciler": rt.AddController(Controller{Name: "c", Watches: watch}),
		"no watches":     rt.AddController(Controller{Name: "c", Reconciler: rec}),
		"nil object":     rt.AddController(Controller{Name: "c", Reconciler: rec, Watches: []Watch{{}}}),
		"empty name":     rt.AddController(Controller{Reconciler: rec, Watches: watch}),
		"nil function":   rt.AddLeaderOnly("f", nil),
		"nil replayer":   rt.AddReplayer("r", nil),
	} {
		if !errors.Is(err, ErrInvalidRegistration) {
			t.Errorf("%s: %v, want ErrInvalidRegistration", name, err)
		}
	}
	if err := rt.AddController(Controller{Name: "c", Reconciler: rec, Watches: watch}); err != nil {
		t.Fatal(err)
	}
	if err := rt.AddLeaderOnly("c", func(context.Context) error { return nil }); !errors.Is(err, ErrInvalidRegistration) {
		t.Errorf("duplicate name: %v", err)
	}
	if err := rt.readyz(nil); err == nil {
		t.Error("readyz before Start passed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rt.Start(ctx); err != nil {
		t.Errorf("Start with an ended context: %v", err)
	}
	if err := rt.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	if err := rt.AddLeaderOnly("late", func(context.Context) error { return nil }); !errors.Is(err, ErrStarted) {
		t.Errorf("AddLeaderOnly after Start: %v, want ErrStarted", err)
	}
}

// TestCrashedLeaderIsReplaced: a leader cancelled without releasing (as after SIGKILL:
// it stops renewing and its controller stops) is replaced once its lease expires, and
// the new leader's controller reconciles every object in its own term.
func TestCrashedLeaderIsReplaced(t *testing.T) {
	recs := []*recorder{{}, {}}
	nodes := []*node{newNodeRelease(t, "crash-a", "crash", false), newNodeRelease(t, "crash-b", "crash", false)}
	for i, n := range nodes {
		if err := n.rt.AddController(Controller{Name: "rec", Reconciler: recs[i], Watches: []Watch{{Object: &corev1.ConfigMap{}}}}); err != nil {
			t.Fatal(err)
		}
	}
	nodes[0].start(t)
	var term1 uint64
	batontest.WaitFor(t, 30*time.Second, "a to lead", func() bool { term1 = nodes[0].rt.Term(); return term1 != 0 })
	nodes[1].start(t)
	batontest.WaitFor(t, 30*time.Second, "b to see a", func() bool { return nodes[1].rt.GetLeader() == "crash-a" })
	crashed := time.Now()
	nodes[0].stop(t) // no release
	var term2 uint64
	batontest.WaitFor(t, 30*time.Second, "b to take the expired lease", func() bool { term2 = nodes[1].rt.Term(); return term2 != 0 })
	if term2 <= term1 {
		t.Fatalf("term went from %d to %d", term1, term2)
	}
	// Not released: b waited for the lease to expire (by its own clock, from the last renew it saw).
	if waited := time.Since(crashed); waited < testLease-testRetry-500*time.Millisecond {
		t.Fatalf("b took the lease %v after the crash; an unreleased lease lasts %v", waited, testLease)
	}
	batontest.WaitFor(t, 30*time.Second, "a reconcile in b's term", func() bool { return recs[1].sawTerm(term2) })
	if recs[0].sawTerm(term2) {
		t.Fatal("the crashed replica reconciled in the new term")
	}
}

// TestNewRefusesUserMistakes: the mistakes a new user makes are refused at New with an
// error naming the field, or said at Start.
func TestNewRefusesUserMistakes(t *testing.T) {
	base := func() Options {
		return Options{LeaderElectionID: "x", LeaderElectionNamespace: "default", Identity: "same", MetricsRegisterer: prometheus.NewRegistry()}
	}
	// A manager running its own election.
	electing, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"},
		LeaderElection: true, LeaderElectionID: "x", LeaderElectionNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(electing, base()); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "LeaderElection") {
		t.Errorf("New on a manager with LeaderElection true: %v, want ErrInvalidOptions naming LeaderElection", err)
	}
	mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	// A pointer to a zero duration is refused as a negative one is, naming the field.
	zero, neg := time.Duration(0), -time.Second
	for field, mod := range map[string]func(*Options){
		"LeaseDuration": func(o *Options) { o.LeaseDuration = &zero },
		"RenewDeadline": func(o *Options) { o.RenewDeadline = &zero },
		"RetryPeriod":   func(o *Options) { o.RetryPeriod = &neg },
	} {
		o := base()
		mod(&o)
		if _, err := New(mgr, o); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), field+":") {
			t.Errorf("New with %s zero or negative: %v, want ErrInvalidOptions naming %s", field, err, field)
		}
	}
	// The lease is released on a graceful stop unless the user says otherwise.
	for _, tc := range []struct {
		opt  *bool
		want bool
	}{{nil, true}, {ptr.To(true), true}, {ptr.To(false), false}} {
		o := base()
		o.LeaderElectionReleaseOnCancel = tc.opt
		s, err := o.resolve(logr.Discard())
		if err != nil || s.election.ReleaseOnCancel != tc.want {
			t.Errorf("LeaderElectionReleaseOnCancel %v: release %v (%v), want %v", tc.opt, s.election.ReleaseOnCancel, err, tc.want)
		}
	}
	// A Runtime with no leader-only work says so when it starts.
	var logs strings.Builder
	var logsMu sync.Mutex
	o := base()
	o.Logger = funcr.New(func(prefix, args string) {
		logsMu.Lock()
		defer logsMu.Unlock()
		logs.WriteString(args + "\n")
	}, funcr.Options{})
	rt, err := New(mgr, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	logsMu.Lock()
	defer logsMu.Unlock()
	if !strings.Contains(logs.String(), "no leader-only work") || !strings.Contains(logs.String(), "NewControllerManagedBy") ||
		!strings.Contains(logs.String(), `"severity"="warning"`) {
		t.Errorf("a Runtime with no leader-only work logged:\n%s\nwant a warning (severity=warning) naming NewControllerManagedBy", logs.String())
	}
}
