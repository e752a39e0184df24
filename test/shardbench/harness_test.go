package shardbench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// params size a run.
type params struct {
	objects int
	workers int           // MaxConcurrentReconciles of each replica
	work    time.Duration // the timer of each reconcile
	churn   float64       // updates per second during the timed part
	shards  int
	lease   time.Duration
	renew   time.Duration
	retry   time.Duration
}

// kind is how the controller is registered.
type kind string

const (
	single  kind = "single-leader" // Runtime.AddController: one leader does all the work
	sharded kind = "sharded"       // Runtime.AddShardedController: every replica a share
)

// gate holds the workers back while it is paused.
type gate struct {
	// mu guards open.
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate() *gate {
	open := make(chan struct{})
	close(open)
	return &gate{open: open}
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// worker is the Reconciler of one replica: it waits for the gate, reads the object
// from the replica's cache, waits on a timer for p.work (a remote call), and records
// the interval with the (shard) term from its context.
type worker struct {
	replica string
	kind    kind
	ns      string
	reader  client.Reader
	work    time.Duration
	gate    *gate
	ledger  *ledger
	held    atomic.Int64 // reconciles waiting at the gate
}

func (w *worker) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != w.ns {
		return reconcile.Result{}, nil // a ConfigMap of another namespace (shard informers watch them all)
	}
	iv := interval{replica: w.replica, shard: -1, start: time.Now()}
	if w.kind == sharded {
		if st, ok := sharding.ShardTermOf(termctx.Get(ctx)); ok {
			iv.shard, iv.term = st.Shard, st.Term
		}
	} else {
		iv.term, _ = termctx.FromContext(ctx)
	}
	defer func() {
		iv.end = time.Now()
		w.ledger.record(req.Name, iv)
	}()
	w.held.Add(1)
	err := w.gate.wait(ctx)
	w.held.Add(-1)
	if err != nil {
		return reconcile.Result{}, err
	}
	var cm corev1.ConfigMap
	if err := w.reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	iv.version, _ = strconv.ParseUint(cm.ResourceVersion, 10, 64)
	timer := time.NewTimer(w.work)
	defer timer.Stop()
	select {
	case <-timer.C:
		iv.done = true
		return reconcile.Result{}, nil
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err() // the term ended: the call is abandoned
	}
}

// replica is one replica of a run: its own manager, clients, Runtime and identity.
type replica struct {
	kit     *batontest.Replica
	mgr     manager.Manager
	rt      *batoncr.Runtime
	sharded *batoncr.Sharded // nil for the single leader
	worker  *worker

	// mu guards queue.
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request] // the controller's latest
}

// queued returns how many requests wait in the replica's queue or at the gate.
func (r *replica) queued() int {
	r.mu.Lock()
	q := r.queue
	r.mu.Unlock()
	n := int(r.worker.held.Load())
	if q != nil {
		n += q.Len()
	}
	return n
}

// ringSeq makes the Lease names of each run new.
var ringSeq atomic.Int64

// newReplicas builds n replicas of the controller of kind k on w's API server, not
// yet started.
func newReplicas(tb testing.TB, p params, w *world, k kind, n int, led *ledger, g *gate) []*replica {
	tb.Helper()
	ring := fmt.Sprintf("sb%d-%s", ringSeq.Add(1), strings.SplitN(string(k), "-", 2)[0])
	kits := batontest.NewReplicas(tb, n, w.cfg)
	rs := make([]*replica, n)
	for i, kit := range kits {
		mgr, err := manager.New(kit.Config(), manager.Options{
			Metrics: metricsserver.Options{BindAddress: "0"},
			Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{w.ns: {}}},
		})
		if err != nil {
			tb.Fatal(err)
		}
		rt, err := batoncr.New(mgr, batoncr.Options{
			LeaderElectionID: ring + "-leader", LeaderElectionNamespace: w.ns, Identity: kit.Name,
			LeaseDuration: &p.lease, RenewDeadline: &p.renew, RetryPeriod: &p.retry,
			MetricsRegisterer: prometheus.NewRegistry(), Logger: logr.Discard(),
		})
		if err != nil {
			tb.Fatal(err)
		}
		wk := &worker{replica: kit.Name, kind: k, ns: w.ns, work: p.work, gate: g, ledger: led}
		r := &replica{kit: kit, mgr: mgr, rt: rt, worker: wk}
		// controller-runtime's default queue, kept to see how many requests wait.
		opts := controller.Options{MaxConcurrentReconciles: p.workers, NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			q := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) { o.RateLimiter = rl; o.Log = logr.Discard() })
			r.mu.Lock()
			r.queue = q
			r.mu.Unlock()
			return q
		}}
		switch k {
		case single:
			wk.reader = mgr.GetCache()
			err = rt.AddController(batoncr.Controller{Name: "bench", Reconciler: wk, Options: opts,
				Watches: []batoncr.Watch{{Object: &corev1.ConfigMap{}}}})
		case sharded:
			r.sharded, err = rt.AddShardedController(batoncr.ShardedController{
				Name: "bench", Reconciler: wk, For: &corev1.ConfigMap{}, Options: opts, CacheOwnShards: true,
				Sharding: sharding.Config{Namespace: w.ns, Name: ring, Shards: p.shards,
					LeaseDuration: p.lease, RenewDeadline: p.renew, RetryPeriod: p.retry},
			})
			if err == nil {
				wk.reader = r.sharded.Reader()
			}
		}
		if err != nil {
			tb.Fatal(err)
		}
		rs[i] = r
	}
	return rs
}

// startBalanced starts the replicas, the first alone until it leads (every shard),
// then the others, and waits until the shares are balanced and stay so.
func startBalanced(tb testing.TB, p params, rs []*replica) {
	tb.Helper()
	timeout := 2*p.lease + 60*time.Second
	rs[0].kit.Run(tb, rs[0].mgr.Start)
	batontest.WaitFor(tb, timeout, "the first replica leading", func() bool {
		if rs[0].sharded == nil {
			return rs[0].rt.IsLeader()
		}
		return len(rs[0].sharded.Sharder().Owned()) == p.shards
	})
	for _, r := range rs[1:] {
		r.kit.Run(tb, r.mgr.Start)
	}
	var state string
	for range 10 {
		batontest.WaitFor(tb, timeout, "balanced shares", func() bool {
			var ok bool
			ok, state = balanced(rs, p.shards)
			return ok
		})
		time.Sleep(sharding.DefaultSettleDelay + p.retry)
		if ok, _ := balanced(rs, p.shards); ok {
			tb.Logf("%d replicas balanced: %s", len(rs), state)
			return
		}
	}
	tb.Fatalf("%d replicas balanced ten times, never for %v: %s", len(rs), sharding.DefaultSettleDelay+p.retry, state)
}

// balanced reports whether every shard is led, each replica leads floor(S/N) or
// ceil(S/N) shards and the ones placement gives it, and every replica sees them all;
// for the single leader, whether one replica leads. It describes the shares.
func balanced(rs []*replica, shards int) (bool, string) {
	if rs[0].sharded == nil {
		leaders := 0
		for _, r := range rs {
			if r.rt.IsLeader() {
				leaders++
			}
		}
		return leaders == 1, fmt.Sprintf("%d leader", leaders)
	}
	n := len(rs)
	total, ok := 0, true
	var shares []string
	for _, r := range rs {
		sh := r.sharded.Sharder()
		owned := sh.Owned()
		ids := make([]int, len(owned))
		for i, st := range owned {
			ids[i] = st.Shard
		}
		total += len(owned)
		shares = append(shares, fmt.Sprintf("%s %d", r.kit.Name, len(owned)))
		if len(owned) < shards/n || len(owned) > (shards+n-1)/n || len(sh.Members()) != n || !slices.Equal(ids, sh.Assigned()) {
			ok = false
		}
	}
	return ok && total == shards, fmt.Sprintf("shards %s", strings.Join(shares, ", "))
}

// shardTerms returns the shard terms each replica leads.
func shardTerms(rs []*replica) [][]sharding.ShardTerm {
	out := make([][]sharding.ShardTerm, len(rs))
	for i, r := range rs {
		if r.sharded != nil {
			out[i] = r.sharded.Sharder().Owned()
		}
	}
	return out
}

// stopAll stops every replica (gracefully: each hands its shards over).
func stopAll(tb testing.TB, rs []*replica) {
	tb.Helper()
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i].kit.Stop(tb)
	}
}
