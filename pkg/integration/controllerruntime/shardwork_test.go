package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// shardWorkLedger records the runs of the ShardWork of every replica, in one
// sequence, and the violations of its contract.
type shardWorkLedger struct {
	mu         sync.Mutex
	seq        int
	runs       []*shardWorkRun
	violations []string
}

// shardWorkRun is one run of a replica's work for one shard term.
type shardWorkRun struct {
	replica    string
	t          sharding.ShardTerm
	ctx        context.Context
	recorded   uint64   // the replica's recorded state of the shard when the run started, 0 for none
	seen       []uint64 // the states received, in order
	start, end int      // in the ledger's sequence; end 0 while running
	wrote      bool     // its fenced write under the shard term succeeded
	cut        bool     // its term ended before its fenced write succeeded
}

func (l *shardWorkLedger) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

// shardStates is one replica's all-replica side: it records, for every shard, the
// highest resourceVersion of the ConfigMaps of ns in that shard, from the
// manager's cache (every replica sees every object).
type shardStates struct {
	ring      sharding.Ring
	namespace string
	replayer  *leadership.ShardedReplayer[uint64]

	mu   sync.Mutex // serialises the publishes of one shard, so they only rise
	last []uint64
}

func (s *shardStates) observe(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Namespace != s.namespace {
		return
	}
	rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	shard := s.ring.ShardOf(string(cm.UID))
	s.mu.Lock()
	defer s.mu.Unlock()
	if rv > s.last[shard] {
		s.last[shard] = rv
		_ = s.replayer.Publish(shard, rv)
	}
}

// TestShardedControllerShardWorkReplays runs two replicas of a sharded controller
// with a ShardWork on the real API server. Every replica records every shard's state
// (the newest resourceVersion of its ConfigMaps) in a leadership.ShardedReplayer from
// the manager's cache; each shard's work watches its shard there and writes, through
// the fenced client under its context, a ConfigMap of its shard. It checks that each
// run of a work runs under its shard's term, finds its shard's recorded state at once
// and never receives an older state after a newer one; that when r1 leaves, each of
// its runs ended before r0's run of the same shard started, and r0's run started from
// the newest state written before the leave; that a later write reaches r0's run; and
// that a write under r1's ended shard term is refused.
func TestShardedControllerShardWorkReplays(t *testing.T) {
	const (
		minObjects = 24
		shards     = 8
	)
	ctx := context.Background()
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var namespaces [2]string // the objects; the works' ConfigMaps
	for i := range namespaces {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shardwork-"}}
		if err := direct.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		namespaces[i] = n.Name
	}
	ns, workNS := namespaces[0], namespaces[1]
	ring, _ := sharding.NewRing(shards)
	// Objects until every shard has two (so that each has a state), at least minObjects.
	perShard := make([]int, shards)
	objects := 0
	for ; objects < minObjects || slices.Min(perShard) < 2; objects++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", objects)}}
		if err := direct.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		perShard[ring.ShardOf(string(cm.UID))]++
	}
	for i := range shards {
		if err := direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: workNS, Name: fmt.Sprint("shard-", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	ledger := &shardWorkLedger{}
	nodes := make([]*node, 2)
	handles := make([]*Sharded, 2)
	states := make([]*shardStates, 2)
	for i := range nodes {
		id := fmt.Sprint("r", i)
		n := newNode(t, id, "shardwork")
		replayer, err := leadership.NewShardedReplayer[uint64](shards)
		if err != nil {
			t.Fatal(err)
		}
		states[i] = &shardStates{ring: ring, namespace: ns, replayer: replayer, last: make([]uint64, shards)}
		informer, err := n.mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    states[i].observe,
			UpdateFunc: func(_, obj any) { states[i].observe(obj) },
		}); err != nil {
			t.Fatal(err)
		}
		fenced := n.rt.FencedClient(nil)
		work := sharding.Work{Name: "state-follower", Run: func(ctx context.Context, st sharding.ShardTerm) error {
			return followShard(ctx, ledger, id, st, replayer, fenced, n.mgr.GetAPIReader(), workNS)
		}}
		h, err := n.rt.AddShardedController(ShardedController{
			Name:       "shardwork",
			Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			For:        &corev1.ConfigMap{},
			Sharding: sharding.Config{
				Namespace: "default", Name: "shardwork-" + ns, Shards: shards,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
			},
			ShardWork: sharding.WorkConfig{Works: []sharding.Work{work}},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i], handles[i] = n, h
	}
	for _, n := range nodes {
		n.start(t)
	}
	running := func(replica string) map[int]*shardWorkRun {
		ledger.mu.Lock()
		defer ledger.mu.Unlock()
		out := map[int]*shardWorkRun{}
		for _, r := range ledger.runs {
			if r.replica == replica && r.end == 0 {
				out[r.t.Shard] = r
			}
		}
		return out
	}
	batontest.WaitFor(t, 30*time.Second, "each replica running the work of its shards, and only those", func() bool {
		for i, h := range handles {
			owned := h.Sharder().Owned()
			run := running(fmt.Sprint("r", i))
			if len(owned) != shards/2 || len(run) != len(owned) {
				return false
			}
			for _, st := range owned {
				if r := run[st.Shard]; r == nil || r.t != st {
					return false
				}
			}
		}
		return true
	})
	// Writes: every object once more, so the states rise while the works run.
	touch := func(name, value string) uint64 {
		var cm corev1.ConfigMap
		if err := direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"v": value}
		if err := direct.Update(ctx, &cm); err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		return rv
	}
	newest := make([]uint64, shards) // the newest resourceVersion written per shard
	shardOf := map[string]int{}
	var list corev1.ConfigMapList
	if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		shard := ring.ShardOf(string(cm.UID))
		shardOf[cm.Name] = shard
		rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		newest[shard] = max(newest[shard], rv)
	}
	for i := range objects {
		name := fmt.Sprint("cm-", i)
		newest[shardOf[name]] = touch(name, "1")
	}
	holds := func(i int, want []uint64) bool {
		for shard, rv := range want {
			if got, _ := states[i].replayer.Get(shard); got != rv {
				return false
			}
		}
		return true
	}
	batontest.WaitFor(t, 30*time.Second, "both replicas recording the newest state of every shard", func() bool {
		return holds(0, newest) && holds(1, newest)
	})
	batontest.WaitFor(t, 30*time.Second, "each run holding its shard's newest state", func() bool {
		for i := range nodes {
			for shard, r := range running(fmt.Sprint("r", i)) {
				ledger.mu.Lock()
				n := len(r.seen)
				ok := n > 0 && r.seen[n-1] == newest[shard]
				ledger.mu.Unlock()
				if !ok {
					return false
				}
			}
		}
		return true
	})

	// r1 leaves: its shards move to r0, whose runs start from the newest state.
	moved := running("r1")
	leaving := map[int]*shardWorkRun{}
	for shard, r := range moved {
		leaving[shard] = r
	}
	nodes[1].stop(t)
	batontest.WaitFor(t, 30*time.Second, "r0 running the work of every shard", func() bool {
		return len(running("r0")) == shards
	})
	after := running("r0")
	for shard, old := range leaving {
		r := after[shard]
		ledger.mu.Lock()
		if old.end == 0 || old.end > r.start {
			t.Errorf("shard %d: r1's run of %v (end %d) not ended before r0's run of %v started (%d)", shard, old.t, old.end, r.t, r.start)
		}
		if r.t.Term <= old.t.Term {
			t.Errorf("shard %d: r0's term %d not above r1's %d", shard, r.t.Term, old.t.Term)
		}
		if len(r.seen) == 0 || r.seen[0] != newest[shard] {
			t.Errorf("shard %d: r0's run started with %v, want the newest state %d first", shard, r.seen, newest[shard])
		}
		ledger.mu.Unlock()
		// A write under r1's ended shard term is refused.
		cm := &corev1.ConfigMap{}
		if err := direct.Get(ctx, client.ObjectKey{Namespace: workNS, Name: fmt.Sprint("shard-", shard)}, cm); err != nil {
			t.Fatal(err)
		}
		if err := nodes[1].rt.FencedClient(nil).Update(old.ctx, cm); !errors.Is(err, ErrTermEnded) {
			t.Errorf("shard %d: a write under r1's ended term %v: %v, want ErrTermEnded", shard, old.t, err)
		}
	}
	// A later write reaches the new owner's run.
	for shard := range leaving {
		for name, s := range shardOf {
			if s == shard {
				newest[shard] = touch(name, "2")
				break
			}
		}
		batontest.WaitFor(t, 30*time.Second, fmt.Sprintf("r0's run of shard %d receiving the write after the move", shard), func() bool {
			ledger.mu.Lock()
			defer ledger.mu.Unlock()
			r := after[shard]
			return len(r.seen) > 0 && r.seen[len(r.seen)-1] == newest[shard]
		})
	}
	if st := handles[0].ShardWorkStats(); st.Failed != 0 || st.Running != shards {
		t.Errorf("r0's work stats %+v, want none failed, %d running", st, shards)
	}
	if st := handles[1].ShardWorkStats(); st.Running != 0 {
		t.Errorf("r1's work stats %+v after it left, want none running", st)
	}
	// The work's counters are served under the leader-only components' names.
	if got, want := seriesValue(t, nodes[0].registry, "baton_component_starts_total", map[string]string{"component": "shardwork/state-follower"}),
		handles[0].ShardWorkStats().Started; got != float64(want) || want == 0 {
		t.Errorf("baton_component_starts_total{component=\"shardwork/state-follower\"} = %v, want %d", got, want)
	}
	nodes[0].stop(t)
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	for _, r := range ledger.runs {
		if r.end == 0 {
			t.Errorf("%s's run of %v still running after its manager stopped", r.replica, r.t)
		}
		// A run whose term ended first (a shard handed over while the ring balanced)
		// may not have written; any other must have.
		if !r.wrote && !r.cut {
			t.Errorf("%s's run of %v: its fenced write under the shard term failed", r.replica, r.t)
		}
	}
	for shard, r := range after {
		if !r.wrote {
			t.Errorf("r0's run of shard %d after the move (%v): its fenced write failed", shard, r.t)
		}
	}
	for _, v := range ledger.violations {
		t.Error(v)
	}
	t.Logf("%d runs of the shard work; moved %d shards", len(ledger.runs), len(leaving))
}

// followShard is the ShardWork of the test: it records its run, writes the shard's
// ConfigMap of workNS through the fenced client under its context, and receives its
// shard's states until its term ends.
func followShard(ctx context.Context, l *shardWorkLedger, replica string, st sharding.ShardTerm,
	replayer *leadership.ShardedReplayer[uint64], fenced client.Client, reader client.Reader, workNS string) error {
	if got, ok := sharding.ShardTermOf(termctx.Get(ctx)); !ok || got != st {
		l.violate("%s: the work of %v runs under %v (ok %v)", replica, st, got, ok)
	}
	r := &shardWorkRun{replica: replica, t: st, ctx: ctx}
	r.recorded, _ = replayer.Get(st.Shard)
	states, err := replayer.Watch(ctx, st.Shard)
	if err != nil {
		return err
	}
	if r.recorded != 0 {
		// At once: the recorded state, or a newer one published meanwhile, without
		// waiting for a write (none comes in this second unless the test makes one).
		select {
		case v := <-states:
			r.seen = append(r.seen, v)
			if v < r.recorded {
				l.violate("%s: the work of %v started with %d, older than the recorded %d", replica, st, v, r.recorded)
			}
		case <-ctx.Done():
		case <-time.After(time.Second):
			l.violate("%s: the work of %v found nothing at once; %d was recorded", replica, st, r.recorded)
		}
	}
	l.mu.Lock()
	l.seq++
	r.start = l.seq
	l.runs = append(l.runs, r)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.seq++
		r.end = l.seq
		l.mu.Unlock()
	}()
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		var cm corev1.ConfigMap
		if err := reader.Get(ctx, client.ObjectKey{Namespace: workNS, Name: fmt.Sprint("shard-", st.Shard)}, &cm); err != nil {
			continue
		}
		cm.Data = map[string]string{"owner": replica}
		err := fenced.Update(ctx, &cm)
		if err == nil {
			l.mu.Lock()
			r.wrote = true
			l.mu.Unlock()
			break
		}
		if errors.Is(err, ErrTermEnded) {
			// The fence may learn of the term's end before the run's context does.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				l.violate("%s: the fenced write of %v found the term ended, but its run was not stopped", replica, st)
			}
			break
		}
		if !apierrors.IsConflict(err) && !strings.Contains(err.Error(), "context canceled") {
			l.violate("%s: the fenced write of %v: %v", replica, st, err)
		}
	}
	l.mu.Lock()
	r.cut = !r.wrote && ctx.Err() != nil
	l.mu.Unlock()
	for v := range states {
		l.mu.Lock()
		if n := len(r.seen); n > 0 && v <= r.seen[n-1] {
			l.violations = append(l.violations, fmt.Sprintf("%s: the work of %v received %d after %d", replica, st, v, r.seen[n-1]))
		}
		r.seen = append(r.seen, v)
		l.mu.Unlock()
	}
	return nil
}

// TestAddShardedControllerRefusesBadShardWork: a bad ShardWork is named.
func TestAddShardedControllerRefusesBadShardWork(t *testing.T) {
	n := newNode(t, "bad", "shardwork-bad")
	run := func(context.Context, sharding.ShardTerm) error { return nil }
	for _, tc := range []struct {
		name string
		work sharding.WorkConfig
		want string
	}{
		{"unnamed work", sharding.WorkConfig{Works: []sharding.Work{{Run: run}}}, "ShardWork: sharding: invalid config: Works[0].Name: empty"},
		{"no run", sharding.WorkConfig{Works: []sharding.Work{{Name: "w"}}}, "Works[0].Run: nil"},
		{"delay without works", sharding.WorkConfig{RestartDelay: time.Second}, "ShardWork has no Works"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.rt.AddShardedController(ShardedController{
				Name: "w", Reconciler: &recorder{}, For: &corev1.ConfigMap{},
				Sharding: sharding.Config{Namespace: "default"}, ShardWork: tc.work,
			})
			if !errors.Is(err, ErrInvalidRegistration) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrInvalidRegistration saying %q", err, tc.want)
			}
		})
	}
}
