package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// shardLedger records the reconciles of every replica of a sharded controller and
// the violations of its contract: a reconcile without its shard term, of an object
// outside that shard, a shard term seen by two replicas, or two replicas reconciling
// one shard at the same moment.
type shardLedger struct {
	ring      sharding.Ring
	namespace string

	mu         sync.Mutex
	termOwner  map[sharding.ShardTerm]string // who reconciled under each shard term
	active     map[int]map[string]int        // running reconciles per shard and replica
	lastBy     map[string]string             // object name -> replica of its last reconcile
	violations []string
}

func newShardLedger(ring sharding.Ring, namespace string) *shardLedger {
	return &shardLedger{
		ring: ring, namespace: namespace,
		termOwner: map[sharding.ShardTerm]string{}, active: map[int]map[string]int{}, lastBy: map[string]string{},
	}
}

func (l *shardLedger) violate(format string, args ...any) {
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

// enter records the start of a reconcile of name by replica under ctx.
func (l *shardLedger) enter(ctx context.Context, replica, name string, uid types.UID) (sharding.ShardTerm, bool) {
	st, ok := sharding.ShardTermOf(termctx.Get(ctx))
	term, tok := termctx.FromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok || !tok || term != st.Term {
		l.violate("%s reconciled %s without its shard term (shard term %v %v, term %d %v)", replica, name, st, ok, term, tok)
		return st, false
	}
	if uid != "" && l.ring.ShardOf(string(uid)) != st.Shard {
		l.violate("%s reconciled %s of shard %d under %v", replica, name, l.ring.ShardOf(string(uid)), st)
	}
	if o, seen := l.termOwner[st]; seen && o != replica {
		l.violate("%v reconciled by %s and %s", st, o, replica)
	}
	l.termOwner[st] = replica
	if l.active[st.Shard] == nil {
		l.active[st.Shard] = map[string]int{}
	}
	for other, n := range l.active[st.Shard] {
		if other != replica && n > 0 {
			l.violate("shard %d reconciled by %s and %s at once", st.Shard, other, replica)
		}
	}
	l.active[st.Shard][replica]++
	l.lastBy[name] = replica
	return st, true
}

func (l *shardLedger) exit(replica string, st sharding.ShardTerm) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active[st.Shard][replica]--
}

// reconciledBy returns a copy of the replica of each object's last reconcile.
func (l *shardLedger) reconciledBy() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.lastBy))
	for k, v := range l.lastBy {
		out[k] = v
	}
	return out
}

func (l *shardLedger) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastBy = map[string]string{}
}

func (l *shardLedger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
}

// shardWriter is the Reconciler of one replica: it records the reconcile and writes
// the replica's name into the ConfigMap through the fenced client, stamped with the
// shard's term.
type shardWriter struct {
	replica string
	ledger  *shardLedger
	reader  client.Reader
	writer  client.Client

	mu      sync.Mutex
	lastCtx context.Context // the context of the last reconcile
}

func (w *shardWriter) last() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastCtx
}

func (w *shardWriter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != w.ledger.namespace {
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := w.reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	st, ok := w.ledger.enter(ctx, w.replica, req.Name, cm.UID)
	if !ok {
		return reconcile.Result{}, nil
	}
	defer w.ledger.exit(w.replica, st)
	w.mu.Lock()
	w.lastCtx = ctx
	w.mu.Unlock()
	if cm.Data["owner"] == w.replica {
		return reconcile.Result{}, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["owner"] = w.replica
	err := w.writer.Update(ctx, &cm)
	if apierrors.IsConflict(err) || errors.Is(err, ErrTermEnded) {
		//lint:ignore SA1019 the rate-limited requeue is what a lagging cache wants
		return reconcile.Result{Requeue: true}, nil // the cache lags, or the shard moved
	}
	return reconcile.Result{}, err
}

// TestShardedControllerSpreadsAndHandsOver runs three replicas of a sharded controller
// over 100 ConfigMaps on the real API server: every object is reconciled (and written,
// fenced by its shard's term), the shards are shared evenly, no shard term is seen by
// two replicas and no shard is reconciled by two at once; then a replica leaves
// gracefully and the objects of its shards are reconciled by their new owners.
func TestShardedControllerSpreadsAndHandsOver(t *testing.T) {
	const (
		objects  = 100
		shards   = 16
		replicas = 3
	)
	ctx := context.Background()
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharded-"}}
	if err := direct.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns := namespace.Name
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}}
		if err := direct.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	ring, _ := sharding.NewRing(shards)
	ledger := newShardLedger(ring, ns)
	nodes := make([]*node, replicas)
	handles := make([]*Sharded, replicas)
	writers := make([]*shardWriter, replicas)
	for i := range nodes {
		id := fmt.Sprint("r", i)
		n := newNode(t, id, "sharded-single")
		writers[i] = &shardWriter{replica: id, ledger: ledger, reader: n.mgr.GetCache(), writer: n.rt.FencedClient(nil)}
		h, err := n.rt.AddShardedController(ShardedController{
			Name:       "writer",
			Reconciler: writers[i],
			For:        &corev1.ConfigMap{},
			Sharding: sharding.Config{
				Namespace: "default", Name: "writer", Shards: shards,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i], handles[i] = n, h
	}
	start := time.Now()
	for _, n := range nodes {
		n.start(t)
	}
	balanced := func(live []*Sharded) bool {
		total := 0
		for _, h := range live {
			owned := len(h.Sharder().Owned())
			if owned < shards/len(live) || owned > (shards+len(live)-1)/len(live) {
				return false
			}
			total += owned
		}
		return total == shards
	}
	everyObjectBy := func(want func(name, by string) bool) bool {
		by := ledger.reconciledBy()
		for i := range objects {
			name := fmt.Sprint("cm-", i)
			if !want(name, by[name]) {
				return false
			}
		}
		return true
	}
	batontest.WaitFor(t, 30*time.Second, "balanced shards and every object reconciled", func() bool {
		return balanced(handles) && everyObjectBy(func(_, by string) bool { return by != "" })
	})
	t.Logf("3 replicas: balanced and all %d objects reconciled %v after start", objects, time.Since(start).Round(time.Millisecond))
	for i, h := range handles {
		t.Logf("r%d: %d shards, stats %+v, server sharding %v", i, len(h.Sharder().Owned()), h.Stats(), h.ServerSharding())
		if h.ServerSharding() != ShardingNotServed {
			t.Errorf("r%d: server sharding %v, want %v (the shared API server runs without the gate)", i, h.ServerSharding(), ShardingNotServed)
		}
	}
	// Every ConfigMap is written by the owner of its shard now, stamped with a term.
	writtenByOwners := func(live []*Sharded, exactTerm func(shard int) bool) bool {
		owner, term := map[int]string{}, map[int]uint64{}
		for i, h := range live {
			for _, st := range h.Sharder().Owned() {
				owner[st.Shard], term[st.Shard] = fmt.Sprint("r", i), st.Term
			}
		}
		var list corev1.ConfigMapList
		if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			shard := ring.ShardOf(string(cm.UID))
			stamp, err := strconv.ParseUint(cm.Annotations[TermAnnotation], 10, 64)
			if cm.Data["owner"] != owner[shard] || err != nil || stamp == 0 {
				return false
			}
			// The stamp is a term of the object's shard: never above the current one,
			// and the current one where the owner had to write under it.
			if stamp > term[shard] || exactTerm(shard) && stamp != term[shard] {
				return false
			}
		}
		return len(list.Items) == objects
	}
	batontest.WaitFor(t, 30*time.Second, "every ConfigMap written by its shard's owner, stamped with a term of its shard", func() bool {
		return writtenByOwners(handles, func(int) bool { return false })
	})

	// A graceful leave: r2's shards move, and their objects are reconciled by the
	// new owners.
	moved := map[int]bool{}
	for _, st := range handles[2].Sharder().Owned() {
		moved[st.Shard] = true
	}
	uids := map[string]int{}
	var list corev1.ConfigMapList
	if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		uids[cm.Name] = ring.ShardOf(string(cm.UID))
	}
	ledger.forget()
	leave := time.Now()
	nodes[2].stop(t)
	stopped := time.Since(leave)
	// A write under a shard term r2 led is refused once that term ended.
	if ctx2 := writers[2].last(); ctx2 == nil {
		t.Error("r2 never reconciled")
	} else {
		cm := list.Items[0].DeepCopy()
		if err := writers[2].writer.Update(ctx2, cm); !errors.Is(err, ErrTermEnded) {
			t.Errorf("a write under r2's ended shard term: got %v, want ErrTermEnded", err)
		}
	}
	batontest.WaitFor(t, 30*time.Second, "the objects of r2's shards reconciled by r0 or r1", func() bool {
		return everyObjectBy(func(name, by string) bool {
			return !moved[uids[name]] || by == "r0" || by == "r1"
		})
	})
	t.Logf("graceful leave of r2 (%d shards): its manager stopped in %v, all their objects reconciled by the new owners %v after the leave began",
		len(moved), stopped.Round(time.Millisecond), time.Since(leave).Round(time.Millisecond))
	batontest.WaitFor(t, 30*time.Second, "2 replicas balanced", func() bool { return balanced(handles[:2]) })
	batontest.WaitFor(t, 30*time.Second, "the objects of r2's shards rewritten, stamped with their new owner's shard term", func() bool {
		return writtenByOwners(handles[:2], func(shard int) bool { return moved[shard] })
	})
	ledger.check(t)
}

// TestAddShardedControllerRefusesBadInput: each missing field is named.
func TestAddShardedControllerRefusesBadInput(t *testing.T) {
	n := newNode(t, "bad", "sharded-bad")
	rec := &recorder{}
	for _, tc := range []struct {
		name string
		c    ShardedController
		want string
	}{
		{"no reconciler", ShardedController{Name: "a", For: &corev1.ConfigMap{}, Sharding: sharding.Config{Namespace: "default"}}, "no Reconciler"},
		{"no For", ShardedController{Name: "a", Reconciler: rec, Sharding: sharding.Config{Namespace: "default"}}, "For is nil"},
		{"no namespace", ShardedController{Name: "a", Reconciler: rec, For: &corev1.ConfigMap{}}, "Sharding.Namespace is empty"},
		{"bad shards", ShardedController{Name: "a", Reconciler: rec, For: &corev1.ConfigMap{}, Sharding: sharding.Config{Namespace: "default", Shards: -1}}, "Shards"},
		// The ring's name defaults to the controller's: capitals make shard Lease names
		// the API server refuses (issue 25, defect 4).
		{"capital ring name", ShardedController{Name: "ConfigMapMirror", Reconciler: rec, For: &corev1.ConfigMap{}, Sharding: sharding.Config{Namespace: "default"}}, `Name: "ConfigMapMirror"`},
		{"ForSelector without a per-shard cache", ShardedController{Name: "a", Reconciler: rec, For: &corev1.ConfigMap{}, Sharding: sharding.Config{Namespace: "default"},
			ForSelector: labels.Everything()}, "ForSelector without CacheOwnShards or CacheOwnShardsByLabel"},
	} {
		_, err := n.rt.AddShardedController(tc.c)
		if !errors.Is(err, ErrInvalidRegistration) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrInvalidRegistration naming %q", tc.name, err, tc.want)
		}
	}
}

// TestShardedControllerOnServerWithShardedWatch: on an API server with the
// ShardedListAndWatch gate, two replicas with CacheOwnShards find the server serves
// sharded lists, each caches exactly the objects of the shards it leads and
// reconciles every one of them; when one leaves, the other caches and reconciles all.
func TestShardedControllerOnServerWithShardedWatch(t *testing.T) {
	const (
		objects = 40
		shards  = 8
	)
	cfg := startGatedEnv(t)
	ctx := context.Background()
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range objects {
		if err := direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("gated-", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var list corev1.ConfigMapList
	if err := direct.List(ctx, &list); err != nil { // every namespace: the shard informers cache them all
		t.Fatal(err)
	}
	ring, _ := sharding.NewRing(shards)
	perShard := map[int]int{}
	for _, cm := range list.Items {
		perShard[ring.ShardOf(string(cm.UID))]++
	}
	ledger := newShardLedger(ring, "default")
	type replica struct {
		h      *Sharded
		cancel context.CancelFunc
		done   chan error
	}
	replicas := make([]*replica, 2)
	for i := range replicas {
		id := fmt.Sprint("g", i)
		mgr, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := New(mgr, Options{
			LeaderElectionID: "gated", LeaderElectionNamespace: "default", Identity: id,
			LeaseDuration: &testLease, RenewDeadline: &testRenew, RetryPeriod: &testRetry,
			MetricsRegisterer: prometheus.NewRegistry(),
		})
		if err != nil {
			t.Fatal(err)
		}
		w := &shardWriter{replica: id, ledger: ledger, writer: rt.FencedClient(nil)}
		h, err := rt.AddShardedController(ShardedController{
			Name: "gated", For: &corev1.ConfigMap{}, Reconciler: w, CacheOwnShards: true,
			Sharding: sharding.Config{
				Namespace: "default", Shards: shards,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		w.reader = h.Reader()
		mctx, cancel := context.WithCancel(ctx)
		r := &replica{h: h, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- mgr.Start(mctx) }()
		replicas[i] = r
	}
	stop := func(r *replica) {
		if r.cancel == nil {
			return
		}
		r.cancel()
		r.cancel = nil
		if err := <-r.done; err != nil {
			t.Errorf("manager returned %v", err)
		}
	}
	defer func() {
		for _, r := range replicas {
			stop(r)
		}
	}()
	// cachedOwn reports whether every live replica caches exactly the objects of the
	// shards it leads, and the shards are all led.
	var lastState string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("last state:", lastState, "reconciled:", len(ledger.reconciledBy()))
		}
	})
	cachedOwn := func(live []*replica) bool {
		lastState = ""
		for _, r := range live {
			lastState += fmt.Sprintf("[owned %v assigned %v members %v sharder %+v cached %d served %v] ", r.h.Sharder().Owned(), r.h.Sharder().Assigned(), r.h.Sharder().Members(), r.h.Sharder().Stats(), r.h.CachedObjects(), r.h.ServerSharding())
		}
		led := 0
		for _, r := range live {
			want := 0
			for _, st := range r.h.Sharder().Owned() {
				want += perShard[st.Shard]
			}
			led += len(r.h.Sharder().Owned())
			if r.h.CachedObjects() != want {
				return false
			}
		}
		return led == shards
	}
	shardOf := map[string]int{}
	for _, cm := range list.Items {
		shardOf[cm.Name] = ring.ShardOf(string(cm.UID))
	}
	// allReconciledBy reports whether every object of the shards (nil: all) was last
	// reconciled by one of ids.
	allReconciledBy := func(shards map[int]bool, ids ...string) bool {
		by := ledger.reconciledBy()
		for i := range objects {
			name := fmt.Sprint("gated-", i)
			if (shards == nil || shards[shardOf[name]]) && !slices.Contains(ids, by[name]) {
				return false
			}
		}
		return true
	}
	batontest.WaitFor(t, 30*time.Second, "every object reconciled, each replica caching its own shards only", func() bool {
		return allReconciledBy(nil, "g0", "g1") && cachedOwn(replicas) &&
			len(replicas[0].h.Sharder().Owned()) == shards/2
	})
	for i, r := range replicas {
		t.Logf("g%d: %d shards, %d of %d ConfigMaps cached, stats %+v", i, len(r.h.Sharder().Owned()), r.h.CachedObjects(), len(list.Items), r.h.Stats())
		if got := r.h.ServerSharding(); got != ShardingServed {
			t.Errorf("g%d: server sharding %v, want %v", i, got, ShardingServed)
		}
	}
	moved := map[int]bool{}
	for _, st := range replicas[1].h.Sharder().Owned() {
		moved[st.Shard] = true
	}
	ledger.forget()
	leave := time.Now()
	stop(replicas[1])
	batontest.WaitFor(t, 30*time.Second, "g0 caching every object and reconciling those of g1's shards after g1 left", func() bool {
		return cachedOwn(replicas[:1]) && allReconciledBy(moved, "g0")
	})
	t.Logf("g1 left (%d shards): g0 caches all %d ConfigMaps and reconciled those of the moved shards %v after the leave began", len(moved), replicas[0].h.CachedObjects(), time.Since(leave).Round(time.Millisecond))
	ledger.check(t)
}

// startGatedEnv starts etcd and a kube-apiserver with ShardedListAndWatch on, and
// stops them when t ends.
func startGatedEnv(t *testing.T) *rest.Config {
	t.Helper()
	dir, err := batontest.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(dir, "kube-apiserver")
	api.Configure().Append("feature-gates", "ShardedListAndWatch=true")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start API server with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop API server: %v", err)
		}
	})
	return cfg
}

// TestShardedControllerTakesACrashedReplicasShards: a replica cut off from the ring's
// Leases (a crash, as far as the others can tell) loses its shard terms by its own
// clock, and the others take its shards after its Leases expire and reconcile their
// objects, never two replicas one shard at once.
func TestShardedControllerTakesACrashedReplicasShards(t *testing.T) {
	const (
		objects  = 30
		shards   = 8
		replicas = 3
	)
	ctx := context.Background()
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharded-crash-"}}
	if err := direct.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns := namespace.Name
	ring, _ := sharding.NewRing(shards)
	shardOf := map[string]int{}
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}}
		if err := direct.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		shardOf[cm.Name] = ring.ShardOf(string(cm.UID))
	}
	ledger := newShardLedger(ring, ns)
	nodes := make([]*node, replicas)
	handles := make([]*Sharded, replicas)
	for i := range nodes {
		id := fmt.Sprint("c", i)
		n := newNode(t, id, "sharded-crash-single")
		leases, err := kubernetes.NewForConfig(n.partition.Wrap(shared.Config()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := n.rt.AddShardedController(ShardedController{
			Name:       "crash",
			Reconciler: &shardWriter{replica: id, ledger: ledger, reader: n.mgr.GetCache(), writer: n.rt.FencedClient(nil)},
			For:        &corev1.ConfigMap{},
			Clientset:  leases,
			Sharding: sharding.Config{
				Namespace: "default", Name: "crash-" + ns, Shards: shards,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i], handles[i] = n, h
		n.start(t)
	}
	ownedBy := func(live []*Sharded) int {
		total := 0
		for _, h := range live {
			total += len(h.Sharder().Owned())
		}
		return total
	}
	batontest.WaitFor(t, 30*time.Second, "every shard led, each replica some", func() bool {
		for _, h := range handles {
			if len(h.Sharder().Owned()) == 0 {
				return false
			}
		}
		return ownedBy(handles) == shards
	})
	moved := map[int]bool{}
	for _, st := range handles[2].Sharder().Owned() {
		moved[st.Shard] = true
	}
	ledger.forget()
	crash := time.Now()
	nodes[2].partition.Cut()
	batontest.WaitFor(t, 30*time.Second, "c2's shard terms over by its own clock", func() bool { return len(handles[2].Sharder().Owned()) == 0 })
	termsOver := time.Since(crash)
	batontest.WaitFor(t, 30*time.Second, "c0 and c1 leading every shard and reconciling the objects of c2's", func() bool {
		if ownedBy(handles[:2]) != shards {
			return false
		}
		by := ledger.reconciledBy()
		for name, shard := range shardOf {
			if moved[shard] && by[name] != "c0" && by[name] != "c1" {
				return false
			}
		}
		return true
	})
	t.Logf("c2 cut off (%d shards, lease %v, renew deadline %v): its terms over after %v, its shards' objects reconciled by c0 and c1 %v after the cut",
		len(moved), testLease, testRenew, termsOver.Round(time.Millisecond), time.Since(crash).Round(time.Millisecond))
	nodes[2].partition.Heal()
	ledger.check(t)
}
