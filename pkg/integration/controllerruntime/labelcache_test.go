package controllerruntime

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// labelReader is the Reconciler of one replica of a controller with CacheByLabel: it
// reads the ConfigMap and the Secret it controls through the controller's Reader,
// records the reconcile in the ledger (which checks its shard and term), and
// remembers whether the child was found.
type labelReader struct {
	replica string
	ledger  *shardLedger
	reader  client.Reader // the handle's Reader, set after Build

	mu        sync.Mutex
	childSeen map[string]bool // owner name -> its Secret found at its last reconcile here
}

func (r *labelReader) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != r.ledger.namespace {
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := r.reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	st, ok := r.ledger.enter(ctx, r.replica, req.Name, cm.UID)
	if !ok {
		return reconcile.Result{}, nil
	}
	defer r.ledger.exit(r.replica, st)
	var sec corev1.Secret
	err := r.reader.Get(ctx, req.NamespacedName, &sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	if c := metav1.GetControllerOf(&sec); err == nil && (c == nil || c.UID != cm.UID) {
		r.ledger.mu.Lock()
		r.ledger.violate("%s read through the Reader a Secret %s not controlled by its ConfigMap %s", r.replica, sec.Name, cm.UID)
		r.ledger.mu.Unlock()
	}
	r.mu.Lock()
	r.childSeen[req.Name] = err == nil
	r.mu.Unlock()
	return reconcile.Result{}, nil
}

func (r *labelReader) sawChild(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.childSeen[name]
}

// writeCounter counts the writes (MODIFIED events) of every ConfigMap and Secret of a
// namespace, by UID, from a watch started before the objects are created.
type writeCounter struct {
	mu     sync.Mutex
	writes map[types.UID]int
	stop   context.CancelFunc
	done   chan struct{}
}

func countWrites(t *testing.T, ns string) *writeCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writeCounter{writes: map[types.UID]int{}, stop: cancel, done: make(chan struct{})}
	cs := shared.Clientset()
	// A retry watcher: the API server ends a watch when its timeout passes or when the
	// watcher falls behind a burst (a run creates a thousand objects at once); a plain
	// watch would then stop counting and the writes after it would go unseen.
	// The namespace is new and empty: its objects' events all come after the list.
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	watchers := map[string]cache.WatchFuncWithContext{
		"ConfigMaps": func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
		"Secrets": func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Secrets(ns).Watch(ctx, o)
		},
	}
	var wg sync.WaitGroup
	for kind, watchFn := range watchers {
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{WatchFuncWithContext: watchFn})
		if err != nil {
			cancel()
			t.Fatalf("watching %s: %v", kind, err)
		}
		wg.Go(func() {
			defer rw.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-rw.ResultChan():
					if !ok {
						return
					}
					if o, isObj := e.Object.(metav1.Object); isObj && e.Type == watch.Modified {
						w.mu.Lock()
						w.writes[o.GetUID()]++
						w.mu.Unlock()
					}
				}
			}
		})
	}
	go func() { wg.Wait(); close(w.done) }()
	t.Cleanup(w.close)
	return w
}

func (w *writeCounter) close() { w.stop(); <-w.done }

// snapshot returns a copy of the counts.
func (w *writeCounter) snapshot() map[types.UID]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[types.UID]int, len(w.writes))
	for k, v := range w.writes {
		out[k] = v
	}
	return out
}

// labelRun is a ring of sharded replicas with CacheByLabel on the shared API server,
// For ConfigMaps, Owns Secrets, over the pairs created in a namespace of its own.
type labelRun struct {
	t        *testing.T
	ns       string
	ring     sharding.Ring
	key      string // the ring's shard label
	direct   client.Client
	nodes    []*node
	handles  []*Sharded
	readers  []*labelReader
	ledger   *shardLedger
	writes   *writeCounter
	owners   []*corev1.ConfigMap
	children []*corev1.Secret
	made     int // pairs created

	mu  sync.Mutex
	why string // what settled or reconciledBy found missing last
}

// miss records what a wait found missing, logged if the test fails.
func (r *labelRun) miss(format string, args ...any) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.why = fmt.Sprintf(format, args...)
	return false
}

func newLabelRun(t *testing.T, replicas, shards int) *labelRun {
	t.Helper()
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "labelcache-"}}
	if err := direct.Create(context.Background(), namespace); err != nil {
		t.Fatal(err)
	}
	ring, _ := sharding.NewRing(shards)
	run := &labelRun{t: t, ns: namespace.Name, ring: ring, key: ShardLabelKey(namespace.Name, ring), direct: direct,
		ledger: newShardLedger(ring, namespace.Name)}
	run.writes = countWrites(t, run.ns)
	t.Cleanup(func() {
		if t.Failed() {
			run.mu.Lock()
			defer run.mu.Unlock()
			t.Log("last found missing:", run.why)
		}
	})
	for range replicas {
		run.addReplica()
	}
	return run
}

// addReplica builds one more replica (not started) and returns its index.
func (r *labelRun) addReplica() int {
	t := r.t
	id := fmt.Sprint("l", len(r.nodes))
	n := newNode(t, id, "") // no single leader
	rec := &labelReader{replica: id, ledger: r.ledger, childSeen: map[string]bool{}}
	cfg := shardingConfig(r.ns, r.ring.Shards())
	cfg.Name = r.ns
	h, err := NewControllerManagedBy(n.rt.Manager()).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Named("labelcache").
		Sharded(cfg, CacheByLabel, ForSelector(labels.SelectorFromSet(labels.Set{runLabel: r.ns}))).
		Build(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.reader = h.Reader()
	r.nodes, r.handles, r.readers = append(r.nodes, n), append(r.handles, h), append(r.readers, rec)
	return len(r.nodes) - 1
}

// runLabel marks the ConfigMaps of a run: its ForSelector selects them alone.
const runLabel = "labelcache-run"

// create creates n ConfigMaps marked with runLabel, each with a Secret it controls.
func (r *labelRun) create(n int) {
	ctx := context.Background()
	for range n {
		name := fmt.Sprint("o", r.made)
		r.made++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name, Labels: map[string]string{runLabel: r.ns}}}
		if err := r.direct.Create(ctx, cm); err != nil {
			r.t.Fatal(err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true),
		}}}}
		if err := r.direct.Create(ctx, sec); err != nil {
			r.t.Fatal(err)
		}
		r.owners, r.children = append(r.owners, cm), append(r.children, sec)
	}
}

// shardCounts returns the ConfigMaps of the run (those its ForSelector selects) and
// the Secrets a ConfigMap controls (in every namespace: the Owns type is not
// selected) of each shard, a Secret in its controller owner's shard.
func (r *labelRun) shardCounts() (cms, secs map[int]int) {
	ctx := context.Background()
	var cmList corev1.ConfigMapList
	var secList corev1.SecretList
	if err := r.direct.List(ctx, &cmList, client.MatchingLabels{runLabel: r.ns}); err != nil {
		r.t.Fatal(err)
	}
	if err := r.direct.List(ctx, &secList); err != nil {
		r.t.Fatal(err)
	}
	cms, secs = map[int]int{}, map[int]int{}
	for _, cm := range cmList.Items {
		cms[r.ring.ShardOf(string(cm.UID))]++
	}
	for _, sec := range secList.Items {
		if c := metav1.GetControllerOf(&sec); c != nil && c.Kind == "ConfigMap" && c.APIVersion == "v1" {
			secs[r.ring.ShardOf(string(c.UID))]++
		}
	}
	return cms, secs
}

// settled reports whether the live replicas share the shards evenly, each caching
// exactly the ConfigMaps and owned Secrets of the shards it leads, and every pair of
// the run (of the shards in only; nil: all) was last reconciled by its shard's owner
// with the child found in its Reader.
func (r *labelRun) settled(live []*Sharded, only map[int]bool) bool {
	total := 0
	for _, h := range live {
		owned := len(h.Sharder().Owned())
		if owned < r.ring.Shards()/len(live) || owned > (r.ring.Shards()+len(live)-1)/len(live) {
			return r.miss("unbalanced: %d shards owned", owned)
		}
		total += owned
	}
	if total != r.ring.Shards() || !r.reconciledBy(live, only) {
		return false
	}
	cms, secs := r.shardCounts()
	for _, h := range live {
		wantCM, wantSec := 0, 0
		for _, st := range h.Sharder().Owned() {
			wantCM, wantSec = wantCM+cms[st.Shard], wantSec+secs[st.Shard]
		}
		if h.Cached(&corev1.ConfigMap{}) != wantCM || h.Cached(&corev1.Secret{}) != wantSec {
			return r.miss("cached %d ConfigMaps and %d Secrets, want %d and %d", h.Cached(&corev1.ConfigMap{}), h.Cached(&corev1.Secret{}), wantCM, wantSec)
		}
	}
	return true
}

// reconciledBy reports whether every pair of the run (of the shards in only, nil: all)
// was last reconciled by the replica of live that leads its shard, its child found.
func (r *labelRun) reconciledBy(live []*Sharded, only map[int]bool) bool {
	by := r.ledger.reconciledBy()
	for _, cm := range r.owners {
		shard := r.ring.ShardOf(string(cm.UID))
		if only != nil && !only[shard] {
			continue
		}
		i := r.leader(live, shard)
		if i < 0 || by[cm.Name] != r.readerOf(live[i]).replica || !r.readerOf(live[i]).sawChild(cm.Name) {
			return r.miss("%s of shard %d: leader %d, last reconciled by %q", cm.Name, shard, i, by[cm.Name])
		}
	}
	return true
}

// readerOf returns the Reconciler of the replica of h.
func (r *labelRun) readerOf(h *Sharded) *labelReader {
	for i, o := range r.handles {
		if o == h {
			return r.readers[i]
		}
	}
	r.t.Fatal("no such replica")
	return nil
}

// leader returns the index of the replica of live leading shard, -1 for none.
func (r *labelRun) leader(live []*Sharded, shard int) int {
	for i, h := range live {
		for _, st := range h.Sharder().Owned() {
			if st.Shard == shard {
				return i
			}
		}
	}
	return -1
}

// checkLabels checks that every pair carries the ring's label: the ConfigMap its own
// shard, the Secret its owner's.
func (r *labelRun) checkLabels() {
	r.t.Helper()
	for i, cm := range r.owners {
		want := strconv.Itoa(r.ring.ShardOf(string(cm.UID)))
		var gotCM corev1.ConfigMap
		var gotSec corev1.Secret
		if err := r.direct.Get(context.Background(), client.ObjectKeyFromObject(cm), &gotCM); err != nil {
			r.t.Fatal(err)
		}
		if err := r.direct.Get(context.Background(), client.ObjectKeyFromObject(r.children[i]), &gotSec); err != nil {
			r.t.Fatal(err)
		}
		if gotCM.Labels[r.key] != want || gotSec.Labels[r.key] != want {
			r.t.Errorf("%s: ConfigMap labelled %q, Secret %q, want both %q (the ConfigMap's shard)", cm.Name, gotCM.Labels[r.key], gotSec.Labels[r.key], want)
		}
	}
}

// labelledOnce waits until every object of the run was written once (its label), and
// reports any written more.
func (r *labelRun) labelledOnce() {
	r.t.Helper()
	batontest.WaitFor(r.t, 20*time.Second, "every object's label write seen", func() bool {
		w := r.writes.snapshot()
		for i, cm := range r.owners {
			if w[cm.UID] == 0 || w[r.children[i].UID] == 0 {
				return false
			}
		}
		return true
	})
	w := r.writes.snapshot()
	for i, cm := range r.owners {
		for _, o := range []client.Object{cm, r.children[i]} {
			if w[o.GetUID()] > 1 {
				r.t.Errorf("%T %s written %d times, want once (its label)", o, o.GetName(), w[o.GetUID()])
			}
		}
	}
}

// figures logs what each live replica caches and returns the largest share of the
// ConfigMaps over total/N.
func (r *labelRun) figures(live []*Sharded) float64 {
	cms, secs := r.shardCounts()
	totalCM, totalSec := 0, 0
	for _, n := range cms {
		totalCM += n
	}
	for _, n := range secs {
		totalSec += n
	}
	worst := 0.0
	for _, h := range live {
		c := h.Cached(&corev1.ConfigMap{})
		share := float64(c) / (float64(totalCM) / float64(len(live)))
		worst = max(worst, share)
		r.t.Logf("N=%d %s: %d shards, caches %d of %d ConfigMaps (%.2f of total/N), %d of %d owned Secrets, %d unlabelled (metadata); stats %+v",
			len(live), r.readerOf(h).replica, len(h.Sharder().Owned()), c, totalCM, share, h.Cached(&corev1.Secret{}), totalSec, h.Unlabelled(), h.Stats())
	}
	return worst
}

// stopLast stops the last live replica and checks that its shards' objects are
// cached and reconciled by the others with no object written.
func (r *labelRun) stopLast(live int) (moved int) {
	r.t.Helper()
	leaving := r.handles[live-1]
	shards := map[int]bool{}
	for _, st := range leaving.Sharder().Owned() {
		shards[st.Shard] = true
	}
	before := r.writes.snapshot()
	r.ledger.forget()
	r.nodes[live-1].stop(r.t)
	rest := r.handles[:live-1]
	batontest.WaitFor(r.t, 30*time.Second, "the moved shards cached and reconciled by the others", func() bool {
		return r.settled(rest, shards)
	})
	after := r.writes.snapshot()
	for uid, n := range after {
		if n != before[uid] {
			r.t.Errorf("object %s written %d times during the move, want 0", uid, n-before[uid])
		}
	}
	return len(shards)
}

// TestShardedLabelCache runs three replicas of a sharded controller with CacheByLabel
// (For ConfigMaps, Owns Secrets) on the real API server, without the sharded-watch
// gate. Pairs created before any replica runs (their shards without owner) and after
// are each labelled once, the child with its owner's shard; each replica caches
// exactly the objects of the shards it leads, reads them through its Reader, and
// reconciles only those; when one stops, its shards' objects are cached and
// reconciled by the others with no object written.
func TestShardedLabelCache(t *testing.T) {
	run := newLabelRun(t, 3, 16)
	outsider := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: run.ns, Name: "outsider"}}
	if err := run.direct.Create(context.Background(), outsider); err != nil {
		t.Fatal(err)
	}
	run.create(40) // while no shard has an owner
	for _, n := range run.nodes {
		n.start(t)
	}
	batontest.WaitFor(t, 60*time.Second, "balanced, each replica caching its shards' objects only, every pair reconciled by its shard's owner", func() bool {
		return run.settled(run.handles, nil)
	})
	run.create(20) // labelled on sight by their shards' owners
	batontest.WaitFor(t, 30*time.Second, "the later pairs reconciled by their shard's owner", func() bool {
		return run.settled(run.handles, nil)
	})
	run.checkLabels()
	run.labelledOnce()
	// ForSelector: a ConfigMap it does not select is left alone.
	var got corev1.ConfigMap
	if err := run.direct.Get(context.Background(), client.ObjectKeyFromObject(outsider), &got); err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Labels[run.key]; ok {
		t.Errorf("a ConfigMap ForSelector does not select labelled %q", v)
	}
	run.figures(run.handles)
	run.stopLast(3)
	run.figures(run.handles[:2])
	var writes uint64
	for _, h := range run.handles {
		writes += h.Stats().LabelWrites
	}
	// Every Secret a ConfigMap controls is labelled too, in every namespace.
	cms, secs := run.shardCounts()
	total := 0
	for shard := range run.ring.Shards() {
		total += cms[shard] + secs[shard]
	}
	if writes < uint64(2*len(run.owners)) || writes > uint64(total) {
		t.Errorf("the replicas count %d label writes, want %d to %d (one per object of the run, at most one per object)", writes, 2*len(run.owners), total)
	}
	run.ledger.check(t)
}

// TestShardedLabelCacheFigures measures, with BATON_LABELCACHE_FIGURES set, the
// ConfigMaps each replica caches with CacheByLabel at N = 3 and 5 (64 shards, 500
// pairs), the object writes per object lifetime and per move.
func TestShardedLabelCacheFigures(t *testing.T) {
	if os.Getenv("BATON_LABELCACHE_FIGURES") == "" {
		t.Skip("set BATON_LABELCACHE_FIGURES to measure")
	}
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			run := newLabelRun(t, n, 64)
			run.create(250)
			for _, node := range run.nodes {
				node.start(t)
			}
			run.create(250)
			batontest.WaitFor(t, 120*time.Second, "settled", func() bool { return run.settled(run.handles, nil) })
			run.labelledOnce()
			if worst := run.figures(run.handles); worst > 1.2 {
				t.Errorf("the busiest replica caches %.2f·total/N, want ≤ 1.2", worst)
			}
			start := time.Now()
			moved := run.stopLast(n)
			t.Logf("N=%d → %d: %d shards moved, 0 object writes (checked), settled %v after the stop began", n, n-1, moved, time.Since(start).Round(time.Millisecond))
			run.figures(run.handles[:n-1])
			run.ledger.check(t)
		})
	}
}

// TestShardedLabelCacheWithServerSharding: on an API server that serves sharded list
// and watch, two replicas with CacheOwnShards and CacheOwnShardsByLabel cache For's
// ConfigMaps by the server's shard selector (none is labelled) and the Secrets they
// control by the shard label (each labelled with its owner's shard); each replica
// caches exactly its shards' objects of both types and reconciles its owners with
// their children found in its Reader.
func TestShardedLabelCacheWithServerSharding(t *testing.T) {
	const pairs, shards = 20, 8
	cfg := startGatedEnv(t)
	ctx := context.Background()
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := sharding.NewRing(shards)
	ledger := newShardLedger(ring, "default")
	var owners []*corev1.ConfigMap
	for i := range pairs {
		cm, _ := createOwned(t, direct, "default", fmt.Sprint("p", i))
		owners = append(owners, cm)
	}
	var handles []*Sharded
	var readers []*labelReader
	for i := range 2 {
		id := fmt.Sprint("s", i)
		mgr, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := New(mgr, Options{Identity: id, MetricsRegisterer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		rec := &labelReader{replica: id, ledger: ledger, childSeen: map[string]bool{}}
		h, err := NewControllerManagedBy(rt.Manager()).
			For(&corev1.ConfigMap{}).
			Owns(&corev1.Secret{}).
			Named("both").
			Sharded(shardingConfig("default", shards), CacheByServerShards, CacheByLabel).
			Build(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.reader = h.Reader()
		handles, readers = append(handles, h), append(readers, rec)
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager %s returned %v", id, err)
			}
		})
	}
	key := ShardLabelKey("both", ring)
	var why string
	settled := func() bool {
		var cms corev1.ConfigMapList
		var secs corev1.SecretList
		if err := direct.List(ctx, &cms); err != nil {
			t.Fatal(err)
		}
		if err := direct.List(ctx, &secs); err != nil {
			t.Fatal(err)
		}
		perCM, perSec := map[int]int{}, map[int]int{}
		for _, cm := range cms.Items {
			perCM[ring.ShardOf(string(cm.UID))]++
		}
		for _, sec := range secs.Items {
			if c := metav1.GetControllerOf(&sec); c != nil && c.Kind == "ConfigMap" {
				perSec[ring.ShardOf(string(c.UID))]++
			}
		}
		by := ledger.reconciledBy()
		led := 0
		for i, h := range handles {
			wantCM, wantSec := 0, 0
			owned := map[int]bool{}
			for _, st := range h.Sharder().Owned() {
				wantCM, wantSec, owned[st.Shard] = wantCM+perCM[st.Shard], wantSec+perSec[st.Shard], true
			}
			led += len(owned)
			if got, gotSec := h.Cached(&corev1.ConfigMap{}), h.Cached(&corev1.Secret{}); got != wantCM || gotSec != wantSec {
				why = fmt.Sprintf("s%d caches %d ConfigMaps and %d Secrets, want %d and %d", i, got, gotSec, wantCM, wantSec)
				return false
			}
			for _, cm := range owners {
				if owned[ring.ShardOf(string(cm.UID))] && (by[cm.Name] != readers[i].replica || !readers[i].sawChild(cm.Name)) {
					why = fmt.Sprintf("%s not reconciled by s%d with its child (by %q)", cm.Name, i, by[cm.Name])
					return false
				}
			}
		}
		why = fmt.Sprintf("%d shards led", led)
		return led == shards
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("last found missing:", why)
		}
	})
	batontest.WaitFor(t, 30*time.Second, "both replicas caching their shards' ConfigMaps and Secrets only, every owner reconciled with its child", settled)
	for i, h := range handles {
		if h.ServerSharding() != ShardingServed {
			t.Errorf("s%d: server sharding %v, want served", i, h.ServerSharding())
		}
	}
	for _, cm := range owners {
		var gotCM corev1.ConfigMap
		var gotSec corev1.Secret
		if err := direct.Get(ctx, client.ObjectKeyFromObject(cm), &gotCM); err != nil {
			t.Fatal(err)
		}
		if err := direct.Get(ctx, client.ObjectKeyFromObject(cm), &gotSec); err != nil {
			t.Fatal(err)
		}
		if v, ok := gotCM.Labels[key]; ok {
			t.Errorf("ConfigMap %s labelled %q: For's objects are cached by the server's selector, never labelled", cm.Name, v)
		}
		if want := strconv.Itoa(ring.ShardOf(string(cm.UID))); gotSec.Labels[key] != want {
			t.Errorf("Secret %s labelled %q, want its owner's shard %s", cm.Name, gotSec.Labels[key], want)
		}
	}
	ledger.check(t)
}
