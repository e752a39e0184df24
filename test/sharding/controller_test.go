package sharding

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// fleetConfig is what every replica of one sharded controller shares: a ring over
// the ConfigMaps of one namespace.
type fleetConfig struct {
	name      string // the controller's and the ring's
	namespace string // of the ConfigMaps; the ring's Leases are in "default"
	shards    int
	lease     time.Duration
	renew     time.Duration
	retry     time.Duration
	work      time.Duration // the I/O each reconcile stands for
	// slow is the I/O of the reconciles of the first slowObjects ConfigMaps
	// (cm-0 ...), longer than a hand-over: a replica that went on reconciling after
	// its shard's term ended would be seen beside the next owner's reconciles.
	slow        time.Duration
	slowObjects int
	workers     int
}

// ctrlReplica is one replica of a sharded controller: a controller-runtime manager
// with Baton's Runtime and one sharded controller (AddShardedController) over the
// ConfigMaps of the fleet's namespace, as a pod of a Deployment runs it.
type ctrlReplica struct {
	id string
	// sw stands between the ring's Lease client and the API server: cutting it is a
	// crash, as far as the ring can tell.
	sw     *batontest.Switch
	h      *batoncr.Sharded
	cancel context.CancelFunc
	done   chan error
}

// ringMember is one replica of a ring: a controller (ctrlReplica) or a bare
// Sharder (sharderReplica).
type ringMember interface {
	name() string
	sharder() *sharding.Sharder
	// stop stops the replica gracefully and waits for it; later calls do nothing.
	stop(tb testing.TB)
	// crash cuts the replica's Lease client off from the API server: it stops
	// renewing and releases nothing.
	crash()
}

func (r *ctrlReplica) name() string               { return r.id }
func (r *ctrlReplica) sharder() *sharding.Sharder { return r.h.Sharder() }
func (r *ctrlReplica) crash()                     { r.sw.Cut() }

// startCtrlReplica builds replica id and starts its manager; it records its reconciles
// in log.
func startCtrlReplica(tb testing.TB, env *batontest.Env, c fleetConfig, id string, log *reconcileLog, terms *termLog) *ctrlReplica {
	tb.Helper()
	mgr, err := manager.New(env.Config(), manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{c.namespace: {}}},
		Logger:  logr.Discard(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	r := &ctrlReplica{id: id, sw: &batontest.Switch{}, done: make(chan error, 1)}
	leases, err := kubernetes.NewForConfig(r.sw.Wrap(env.Config()))
	if err != nil {
		tb.Fatal(err)
	}
	var logger logr.Logger
	if os.Getenv("BATON_SHARDING_LOG") != "" {
		logger = logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)).WithValues("replica", id)
	} else {
		logger = logr.Discard()
	}
	rt, err := batoncr.New(mgr, batoncr.Options{
		LeaderElectionID: c.name + "-single", LeaderElectionNamespace: "default", Identity: id,
		LeaseDuration: &c.lease, RenewDeadline: &c.renew, RetryPeriod: &c.retry,
		MetricsRegisterer: prometheus.NewRegistry(), DeathSignal: ptr.To(false), Logger: logger,
	})
	if err != nil {
		tb.Fatal(err)
	}
	r.h, err = rt.AddShardedController(batoncr.ShardedController{
		Name:       c.name,
		Reconciler: &recordingReconciler{replica: id, reader: mgr.GetCache(), log: log, work: c.workOf},
		For:        &corev1.ConfigMap{},
		Clientset:  leases,
		Options:    controller.Options{MaxConcurrentReconciles: c.workers},
		ShardWork:  termWork(id, terms),
		Sharding: sharding.Config{
			Namespace: "default", Name: c.name, Shards: c.shards,
			LeaseDuration: c.lease, RenewDeadline: c.renew, RetryPeriod: c.retry,
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	return r
}

// termWork returns a ShardWork that records replica id's shard terms in terms (when
// each began and ended, by the controller's own term context), or none for nil.
func termWork(id string, terms *termLog) sharding.WorkConfig {
	if terms == nil {
		return sharding.WorkConfig{}
	}
	record := terms.onAcquired(id)
	return sharding.WorkConfig{Works: []sharding.Work{{Name: "terms", Run: func(ctx context.Context, _ sharding.ShardTerm) error {
		record(ctx)
		return nil
	}}}}
}

// stop stops the replica gracefully, as a SIGTERM would (it hands its shards over
// and leaves), and waits for its manager to return. Later calls do nothing.
func (r *ctrlReplica) stop(tb testing.TB) {
	tb.Helper()
	if r.cancel == nil {
		return
	}
	r.sw.Heal()
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			tb.Errorf("%s: manager returned %v", r.id, err)
		}
	case <-time.After(batontest.StopTimeout):
		tb.Errorf("%s: manager did not stop within %v", r.id, batontest.StopTimeout)
	}
}

// shares reports whether the shards are balanced over live: every shard led by
// exactly one of them, each leading at most ceil(S/N); it returns the shares, and
// what is wrong when not.
func shares[R ringMember](live []R, shards int) (map[string]int, error) {
	count := map[string]int{}
	owner := map[int]string{}
	limit := (shards + len(live) - 1) / len(live)
	var problems []string
	for _, r := range live {
		id := r.name()
		for _, st := range r.sharder().Owned() {
			if o, ok := owner[st.Shard]; ok {
				problems = append(problems, fmt.Sprintf("shard %d led by %s and %s", st.Shard, o, id))
			}
			owner[st.Shard] = id
			count[id]++
		}
		if count[id] > limit {
			problems = append(problems, fmt.Sprintf("%s leads %d shards, above ceil(%d/%d) = %d", id, count[id], shards, len(live), limit))
		}
	}
	if len(owner) != shards {
		problems = append(problems, fmt.Sprintf("%d of %d shards led", len(owner), shards))
	}
	if len(problems) > 0 {
		return count, fmt.Errorf("shares %v: %s", count, strings.Join(problems, "; "))
	}
	return count, nil
}

// waitBalancedReplicas waits until shares(live) holds, failing tb after timeout; it
// returns how long it took.
func waitBalancedReplicas[R ringMember](tb testing.TB, live []R, shards int, after string, timeout time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		count, err := shares(live, shards)
		if err == nil {
			tb.Logf("after %s: balanced in %v, shares %v", after, time.Since(start).Round(time.Millisecond), count)
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %s: not balanced within %v: %v", after, timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reconcileSpan is one reconcile as the Reconciler saw it.
type reconcileSpan struct {
	replica    string
	object     string
	version    string // the resourceVersion it read
	shard      sharding.ShardTerm
	start, end time.Time
	completed  bool // its work ran to the end under a live term
}

// reconcileLog records every reconcile of every replica, and the reconciles that broke
// the contract outright (no shard term in the context, an object of another shard).
// Safe for concurrent use.
type reconcileLog struct {
	ring sharding.Ring

	// mu guards the fields below.
	mu         sync.Mutex
	spans      []reconcileSpan
	violations []string
}

func (l *reconcileLog) add(s reconcileSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spans = append(l.spans, s)
}

func (l *reconcileLog) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

// seen returns, for each object, the resourceVersions that a completed reconcile read.
func (l *reconcileLog) seen() map[string]map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]map[string]bool{}
	for _, s := range l.spans {
		if !s.completed {
			continue
		}
		if out[s.object] == nil {
			out[s.object] = map[string]bool{}
		}
		out[s.object][s.version] = true
	}
	return out
}

// check fails tb for every violation: a reconcile without its shard term or of an
// object outside it, a shard term reconciled by two replicas, and two replicas'
// reconciles of one shard overlapping in time (so of one object, too). It returns
// the number of reconciles.
func (l *reconcileLog) check(tb testing.TB) int {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		tb.Error(v)
	}
	termBy := map[sharding.ShardTerm]string{}
	byShard := map[int][]reconcileSpan{}
	for _, s := range l.spans {
		if o, ok := termBy[s.shard]; ok && o != s.replica {
			tb.Errorf("%v reconciled by %s and %s", s.shard, o, s.replica)
		}
		termBy[s.shard] = s.replica
		byShard[s.shard.Shard] = append(byShard[s.shard.Shard], s)
	}
	overlaps := 0
	for shard, spans := range byShard {
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		// The latest end of each replica's reconciles of this shard that began so far.
		ends := map[string]reconcileSpan{}
		for _, s := range spans {
			for other, prev := range ends {
				if other != s.replica && prev.end.After(s.start) {
					overlaps++
					if overlaps <= 10 {
						tb.Errorf("shard %d: %s reconciled %s (%v) from %v to %v while %s reconciled %s (%v) until %v",
							shard, s.replica, s.object, s.shard, s.start.Format(time.StampMicro), s.end.Format(time.StampMicro),
							other, prev.object, prev.shard, prev.end.Format(time.StampMicro))
					}
				}
			}
			if prev, ok := ends[s.replica]; !ok || s.end.After(prev.end) {
				ends[s.replica] = s
			}
		}
	}
	if overlaps > 0 {
		tb.Errorf("%d reconciles overlapped one of another replica on the same shard", overlaps)
	}
	return len(l.spans)
}

// replicasOf returns the replicas that reconciled, sorted.
func (l *reconcileLog) replicasOf() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.spans {
		if !slices.Contains(out, s.replica) {
			out = append(out, s.replica)
		}
	}
	slices.Sort(out)
	return out
}

// workOf returns the I/O a reconcile of ConfigMap name stands for.
func (c fleetConfig) workOf(name string) time.Duration {
	var i int
	if _, err := fmt.Sscanf(name, "cm-%d", &i); err == nil && i < c.slowObjects {
		return c.slow
	}
	return c.work
}

// recordingReconciler reads the ConfigMap from the replica's cache, stands for the
// I/O work gives its name (cut short when the shard's term ends), and records the reconcile with
// the shard term its context carries.
type recordingReconciler struct {
	replica string
	reader  client.Reader
	log     *reconcileLog
	work    func(name string) time.Duration
}

func (r *recordingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	start := time.Now()
	st, ok := sharding.ShardTermOf(termctx.Get(ctx))
	if !ok {
		r.log.violate("%s reconciled %s without a shard term in its context", r.replica, req.Name)
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := r.reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if got := r.log.ring.ShardOf(string(cm.UID)); got != st.Shard {
		r.log.violate("%s reconciled %s of shard %d under %v", r.replica, req.Name, got, st)
	}
	t := time.NewTimer(r.work(req.Name))
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	r.log.add(reconcileSpan{
		replica: r.replica, object: req.Name, version: cm.ResourceVersion, shard: st,
		start: start, end: time.Now(), completed: ctx.Err() == nil,
	})
	return reconcile.Result{}, nil
}

// createConfigMapsIn creates n ConfigMaps cm-0 ... in namespace ns (created too).
func createConfigMapsIn(tb testing.TB, c client.Client, ns string, n int) {
	tb.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}, Data: map[string]string{"gen": "0"}}
		if err := c.Create(ctx, cm); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestReconcileLogFindsOverlaps: the checker of the reconcile spans fails a history
// where two replicas reconciled one shard at once, or one shard term was seen by two
// replicas, and passes one where they took turns.
func TestReconcileLogFindsOverlaps(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	span := func(replica string, shard int, term uint64, from, to int) reconcileSpan {
		return reconcileSpan{replica: replica, object: "cm", shard: sharding.ShardTerm{Shard: shard, Term: term}, start: at(from), end: at(to), completed: true}
	}
	for _, tc := range []struct {
		name  string
		spans []reconcileSpan
		fails bool
	}{
		{"turns", []reconcileSpan{span("a", 1, 1, 0, 10), span("a", 1, 1, 5, 20), span("b", 1, 2, 20, 30), span("a", 2, 1, 25, 26)}, false},
		{"overlap", []reconcileSpan{span("a", 1, 1, 0, 10), span("a", 1, 1, 5, 20), span("b", 1, 2, 19, 30)}, true},
		{"one term, two replicas", []reconcileSpan{span("a", 1, 1, 0, 10), span("b", 1, 1, 20, 30)}, true},
	} {
		rec := &recordingTB{TB: t}
		l := &reconcileLog{spans: tc.spans}
		l.check(rec)
		if rec.failed != tc.fails {
			t.Errorf("%s: check failed %v, want %v (%v)", tc.name, rec.failed, tc.fails, rec.msgs)
		}
	}
}

// recordingTB records failures instead of failing the test.
type recordingTB struct {
	testing.TB
	failed bool
	msgs   []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Error(args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprint(args...))
}
func (r *recordingTB) Logf(string, ...any) {}

// sharderReplica is one replica of a ring run by a bare Sharder on the real API
// server, its shard terms recorded by their callbacks in a termLog.
type sharderReplica struct {
	id     string
	sw     *batontest.Switch // between its Lease client and the API server
	s      *sharding.Sharder
	cancel context.CancelFunc
	done   chan error
}

func (r *sharderReplica) name() string               { return r.id }
func (r *sharderReplica) sharder() *sharding.Sharder { return r.s }
func (r *sharderReplica) crash()                     { r.sw.Cut() }

// startSharderReplica starts replica id of c's ring (its Leases in "default"),
// recording its shard terms in terms.
func startSharderReplica(tb testing.TB, env *batontest.Env, c fleetConfig, id string, terms *termLog) *sharderReplica {
	tb.Helper()
	r := &sharderReplica{id: id, sw: &batontest.Switch{}, done: make(chan error, 1)}
	cs, err := kubernetes.NewForConfig(r.sw.Wrap(env.Config()))
	if err != nil {
		tb.Fatal(err)
	}
	var logger *slog.Logger
	if os.Getenv("BATON_SHARDING_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", id)
	}
	r.s, err = sharding.New(sharding.Config{
		Identity: id, Name: c.name, Namespace: "default", Shards: c.shards,
		LeaseDuration: c.lease, RenewDeadline: c.renew, RetryPeriod: c.retry,
	}, cs, sharding.Callbacks{OnAcquired: terms.onAcquired(id)}, logger)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.s.Run(ctx) }()
	return r
}

func (r *sharderReplica) stop(tb testing.TB) {
	tb.Helper()
	if r.cancel == nil {
		return
	}
	r.sw.Heal()
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			tb.Errorf("%s: Run returned %v", r.id, err)
		}
	case <-time.After(batontest.StopTimeout):
		tb.Errorf("%s: Run did not return within %v", r.id, batontest.StopTimeout)
	}
}

// termLog records the shard terms of a ring's replicas from their callbacks: from
// the call of OnAcquired to the end of its context. Safe for concurrent use.
type termLog struct {
	// mu guards spans.
	mu    sync.Mutex
	spans []termSpan
}

type termSpan struct {
	shard      int
	owner      string
	start, end time.Time // end zero while the term lasts
}

// onAcquired returns the OnAcquired of replica id.
func (l *termLog) onAcquired(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		st, _ := sharding.ShardTermOf(termctx.Get(ctx))
		l.mu.Lock()
		i := len(l.spans)
		l.spans = append(l.spans, termSpan{shard: st.Shard, owner: id, start: time.Now()})
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.spans[i].end = time.Now()
		l.mu.Unlock()
	}
}

// gaps returns, for every term of owner ("" for any) that ended in [from, to), the
// time from its end to the start of its shard's next term (to's distance when none
// started by then), sorted, and when the last of those next terms started.
func (l *termLog) gaps(from, to time.Time, owner string) ([]time.Duration, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	var last time.Time
	for _, ended := range l.spans {
		if ended.end.IsZero() || ended.end.Before(from) || !ended.end.Before(to) || (owner != "" && ended.owner != owner) {
			continue
		}
		next := time.Time{}
		for _, s := range l.spans {
			if s.shard == ended.shard && !s.start.Before(ended.end) && (next.IsZero() || s.start.Before(next)) {
				next = s.start
			}
		}
		if next.IsZero() {
			out = append(out, to.Sub(ended.end))
			continue
		}
		out = append(out, next.Sub(ended.end))
		if next.After(last) {
			last = next
		}
	}
	slices.Sort(out)
	return out, last
}

// slowest describes the n slowest moves of the terms that ended from from on: the
// time from a term's end to its shard's next term, the shard, its old and new owner,
// when the term ended, from from, and the move's steps as writes (the ring's Lease
// writes) show them (moveSteps).
func (l *termLog) slowest(from time.Time, n int, writes []leaseWrite) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type mv struct {
		gap  time.Duration
		line string
	}
	var out []mv
	for _, ended := range l.spans {
		if ended.end.IsZero() || ended.end.Before(from) {
			continue
		}
		next := l.nextLocked(ended)
		if next == nil {
			continue
		}
		out = append(out, mv{next.start.Sub(ended.end), fmt.Sprintf("%v (shard %d, %s to %s, at %v%s)",
			next.start.Sub(ended.end).Round(100*time.Microsecond), ended.shard, ended.owner, next.owner, ended.end.Sub(from).Round(time.Millisecond),
			moveSteps(writes, ended.shard, ended.end, next.start))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gap > out[j].gap })
	var lines []string
	for i := 0; i < n && i < len(out); i++ {
		lines = append(lines, out[i].line)
	}
	return lines
}

// nextLocked returns the first term of ended's shard that started at or after its
// end, nil for none. l.mu is held.
func (l *termLog) nextLocked(ended termSpan) *termSpan {
	var next *termSpan
	for i := range l.spans {
		s := &l.spans[i]
		if s.shard == ended.shard && !s.start.Before(ended.end) && (next == nil || s.start.Before(next.start)) {
			next = s
		}
	}
	return next
}

// handOffParts splits the one-write hand-overs of the terms that ended in [from, to)
// into their parts, each sorted: from the old term's end to the hand-off's send (its
// renewTime), from the send to its arrival on the benchmark's Lease watch, and from
// there to the new term's start. The first and the last are the replicas' own; the
// middle one is the API server's (and the watch's).
func (l *termLog) handOffParts(from, to time.Time, writes []leaseWrite) (sent, seen, term []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ended := range l.spans {
		if ended.end.IsZero() || ended.end.Before(from) || !ended.end.Before(to) {
			continue
		}
		next := l.nextLocked(ended)
		if next == nil {
			continue
		}
		for _, w := range writes {
			if w.shard != ended.shard || w.stamp.Before(ended.end.Add(-time.Millisecond)) || w.stamp.After(next.start) {
				continue
			}
			if w.kind == shardHandOff {
				sent = append(sent, w.stamp.Sub(ended.end))
				seen = append(seen, w.at.Sub(w.stamp))
				term = append(term, next.start.Sub(w.at))
			}
			break
		}
	}
	for _, d := range [][]time.Duration{sent, seen, term} {
		slices.Sort(d)
	}
	return sent, seen, term
}

// overlaps returns how many terms began before the previous term of their shard
// ended.
func (l *termLog) overlaps() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	byShard := map[int][]termSpan{}
	for _, s := range l.spans {
		byShard[s.shard] = append(byShard[s.shard], s)
	}
	n := 0
	for _, spans := range byShard {
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		for i := 1; i < len(spans); i++ {
			if spans[i-1].end.IsZero() || spans[i].start.Before(spans[i-1].end) {
				n++
			}
		}
	}
	return n
}

// moveSteps describes the steps of shard's move from a term that ended at end to the
// next that started at start, by the shard Lease's release and take among writes:
// when each was sent (its renewTime, one clock with the replicas in this process) and
// when the benchmark's watch delivered it, each from the step before, or those of a
// one-write hand-over; "" if writes hold neither of the shard in [end, start].
func moveSteps(writes []leaseWrite, shard int, end, start time.Time) string {
	var rel, take *leaseWrite
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	for i := range writes {
		w := &writes[i]
		if w.shard != shard || w.stamp.Before(end.Add(-time.Millisecond)) || w.stamp.After(start) {
			continue
		}
		if w.kind == shardHandOff && rel == nil {
			return fmt.Sprintf(": hand-off sent +%v, seen +%v, term +%v", r(w.stamp.Sub(end)), r(w.at.Sub(w.stamp)), r(start.Sub(w.at)))
		}
		if w.kind == shardRelease && rel == nil {
			rel = w
		}
		if w.kind == shardTake && rel != nil && take == nil {
			take = w
		}
	}
	if rel == nil || take == nil {
		return ""
	}
	return fmt.Sprintf(": release sent +%v, seen +%v, take sent +%v, seen +%v, term +%v",
		r(rel.stamp.Sub(end)), r(rel.at.Sub(rel.stamp)), r(take.stamp.Sub(rel.at)), r(take.at.Sub(take.stamp)), r(start.Sub(take.at)))
}
