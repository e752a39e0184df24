package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// noEvents filters out every event of For, so that only Owns enqueues.
var noEvents = predicate.NewPredicateFuncs(func(client.Object) bool { return false })

// requestLog records the requests a Reconciler got, with the time and the shard.
type requestLog struct {
	replica string
	mu      sync.Mutex
	seen    map[types.NamespacedName][]time.Time
	noTerm  int
}

func newRequestLog(replica string) *requestLog {
	return &requestLog{replica: replica, seen: map[types.NamespacedName][]time.Time{}}
}

func (l *requestLog) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	_, ok := termctx.FromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.noTerm++
	}
	l.seen[req.NamespacedName] = append(l.seen[req.NamespacedName], time.Now())
	return reconcile.Result{}, nil
}

// since reports whether req was reconciled after t.
func (l *requestLog) since(req types.NamespacedName, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.seen[req] {
		if at.After(t) {
			return true
		}
	}
	return false
}

// newBuilderNamespace creates a namespace of its own for a test.
func newBuilderNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "builder-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// createOwned creates a ConfigMap and a Secret it controls, and returns both.
func createOwned(t *testing.T, c client.Client, ns, name string) (*corev1.ConfigMap, *corev1.Secret) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true),
	}}}}
	if err := c.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	return cm, sec
}

// touch changes a label of obj, so that its watchers get an update event.
func touch(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"touched":"%d"}}}`, time.Now().UnixNano()))
	if err := c.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
}

// TestBuilderOwnsLeaderOnly: a leader-only controller built with the builder's chain
// (For with a predicate that passes nothing, Owns) reconciles the owner of a Secret
// that changed, in a term, and nothing for a Secret without an owner.
func TestBuilderOwnsLeaderOnly(t *testing.T) {
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := newBuilderNamespace(t, direct)
	n := newNode(t, "builder-solo", "builder-owns")
	log := newRequestLog("solo")
	err = NewControllerManagedBy(n.rt.Manager()).
		For(&corev1.ConfigMap{}, WithPredicates(noEvents)).
		Owns(&corev1.Secret{}).
		Complete(log)
	if err != nil {
		t.Fatal(err)
	}
	n.start(t)
	batontest.WaitFor(t, 20*time.Second, "leading", n.rt.IsLeader)
	start := time.Now()
	cm, sec := createOwned(t, direct, ns, "owner")
	orphan := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}}
	if err := direct.Create(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cm)
	batontest.WaitFor(t, 20*time.Second, "the owner reconciled for its Secret's creation", func() bool { return log.since(key, start) })
	touched := time.Now()
	touch(t, direct, sec)
	batontest.WaitFor(t, 20*time.Second, "the owner reconciled for its Secret's update", func() bool { return log.since(key, touched) })
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.noTerm != 0 {
		t.Errorf("%d reconciles without a term", log.noTerm)
	}
	for req := range log.seen {
		if req.Namespace == ns && req != key {
			t.Errorf("reconciled %v; only the owner %v should be (For's events are filtered out)", req, key)
		}
	}
	n.rt.mu.Lock()
	named := n.rt.names["configmap"]
	n.rt.mu.Unlock()
	if !named {
		t.Error("no controller named \"configmap\": the default name is For's kind in lower case")
	}
}

// TestBuilderOwnsSharded: two replicas of a sharded controller built with the
// builder's chain (For passing no event, Owns): a Secret's update reconciles its
// owner on the replica that leads the owner's shard, and only there.
func TestBuilderOwnsSharded(t *testing.T) {
	const objects, shards = 12, 8
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := newBuilderNamespace(t, direct)
	var nodes []*node
	var handles []*Sharded
	var logs []*requestLog
	for i := range 2 {
		n := newNode(t, fmt.Sprint("b", i), "builder-sharded-single")
		log := newRequestLog(fmt.Sprint("b", i))
		h, err := NewControllerManagedBy(n.rt.Manager()).
			For(&corev1.ConfigMap{}, WithPredicates(noEvents)).
			Owns(&corev1.Secret{}).
			Named("owns-sharded").
			Sharded(shardingConfig("default", shards)).
			Build(log)
		if err != nil {
			t.Fatal(err)
		}
		nodes, handles, logs = append(nodes, n), append(handles, h), append(logs, log)
	}
	for _, n := range nodes {
		n.start(t)
	}
	batontest.WaitFor(t, 30*time.Second, "the shards shared", func() bool {
		a, b := len(handles[0].Sharder().Owned()), len(handles[1].Sharder().Owned())
		return a == shards/2 && b == shards/2
	})
	var secrets []*corev1.Secret
	var owners []*corev1.ConfigMap
	created := time.Now()
	for i := range objects {
		cm, sec := createOwned(t, direct, ns, fmt.Sprint("o", i))
		owners, secrets = append(owners, cm), append(secrets, sec)
	}
	ring, _ := sharding.NewRing(shards)
	ownerOf := func(cm *corev1.ConfigMap) int {
		shard := ring.ShardOf(string(cm.UID))
		for i, h := range handles {
			for _, st := range h.Sharder().Owned() {
				if st.Shard == shard {
					return i
				}
			}
		}
		return -1
	}
	reconciledByOwners := func(what string, since time.Time) {
		t.Helper()
		for _, cm := range owners {
			key := client.ObjectKeyFromObject(cm)
			batontest.WaitFor(t, 20*time.Second, fmt.Sprintf("%v reconciled after its Secret's %s", key, what), func() bool {
				i := ownerOf(cm)
				return i >= 0 && logs[i].since(key, since)
			})
			if other := logs[1-ownerOf(cm)]; other.since(key, since) {
				t.Errorf("%v reconciled by %s after its Secret's %s; it does not lead the owner's shard", key, other.replica, what)
			}
		}
	}
	reconciledByOwners("creation", created)
	touched := time.Now()
	for _, sec := range secrets {
		touch(t, direct, sec)
	}
	reconciledByOwners("update", touched)
}

// TestShardOwnerHandlerEnqueuesOnlyLedOwners: the sharded Owns handler enqueues the
// controller owner of an object when its shard (from the ownerReference's UID) is
// led here, and nothing for an owner of another shard, a non-controller owner or an
// owner of another kind.
func TestShardOwnerHandlerEnqueuesOnlyLedOwners(t *testing.T) {
	n := newNode(t, "handler", "builder-handler")
	ring, _ := sharding.NewRing(4)
	var led, other types.UID
	for i := 0; led == "" || other == ""; i++ {
		uid := types.UID(fmt.Sprint("uid-", i))
		if ring.ShardOf(string(uid)) == 0 {
			led = uid
		} else {
			other = uid
		}
	}
	s := &Sharded{r: n.rt, ring: ring, logger: n.rt.logger, shards: map[int]*shardLead{0: {ctx: context.Background()}},
		gone: map[types.NamespacedName]int{}}
	h := &shardOwnerHandler{s: s, owner: corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind()}
	ref := func(name string, uid types.UID, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(controller)}
	}
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		want []string
	}{
		{"owner led here", []metav1.OwnerReference{ref("led", led, "ConfigMap", true)}, []string{"led"}},
		{"owner of another shard", []metav1.OwnerReference{ref("other", other, "ConfigMap", true)}, nil},
		{"not the controller", []metav1.OwnerReference{ref("led", led, "ConfigMap", false)}, nil},
		{"another kind", []metav1.OwnerReference{ref("led", led, "Secret", true)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child", OwnerReferences: tc.refs}}
			h.Create(context.Background(), event.CreateEvent{Object: sec}, q)
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: sec, ObjectNew: sec}, q)
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req.Namespace+"/"+req.Name)
				q.Done(req)
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, "ns/"+w)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("enqueued %v, want %v", got, want)
			}
		})
	}
}

// TestBuilderRefusesIncompleteChains: Complete returns an error wrapping
// ErrInvalidRegistration, naming what is missing, for a chain without For, with For
// twice, without a Reconciler, or on a manager that is not a Runtime's.
func TestBuilderRefusesIncompleteChains(t *testing.T) {
	n := newNode(t, "builder-errors", "builder-errors")
	rec := newRequestLog("x")
	for _, tc := range []struct {
		name  string
		build func() error
		want  string
	}{
		{"no For", func() error { return NewControllerManagedBy(n.rt.Manager()).Named("a").Complete(rec) }, "For is not called"},
		{"For twice", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).For(&corev1.Secret{}).Complete(rec)
		}, "For is called twice"},
		{"no Reconciler", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Complete(nil)
		}, "Reconciler is nil"},
		{"raw manager", func() error { return NewControllerManagedBy(n.mgr).For(&corev1.ConfigMap{}).Complete(rec) }, "rt.Manager()"},
		{"Watches without handler", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Watches(&corev1.Secret{}, nil).Complete(rec)
		}, "Watches call 1"},
		{"sharded OnlyMetadata For", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}, OnlyMetadata).
				Sharded(sharding.Config{Namespace: "default"}).Complete(rec)
		}, "OnlyMetadata"},
		{"CacheByLabel with MatchEveryOwner", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}, MatchEveryOwner).
				Named("every").Sharded(sharding.Config{Namespace: "default"}, CacheByLabel).Complete(rec)
		}, "Owns call 1: MatchEveryOwner with CacheByLabel"},
		{"CacheByLabel with OnlyMetadata Owns", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}, OnlyMetadata).
				Named("meta").Sharded(sharding.Config{Namespace: "default"}, CacheByLabel).Complete(rec)
		}, "Owns call 1: OnlyMetadata with CacheByLabel"},
		{"CacheByLabel with Owns of For's type", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Owns(&corev1.ConfigMap{}).
				Named("same").Sharded(sharding.Config{Namespace: "default"}, CacheByLabel).Complete(rec)
		}, "Owns call 1: *v1.ConfigMap is For's type too, with CacheByLabel"},
		{"CacheByLabel with one type owned twice", func() error {
			return NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).Owns(&corev1.Secret{}).
				Named("twice").Sharded(sharding.Config{Namespace: "default"}, CacheByLabel).Complete(rec)
		}, "Owns call 2: *v1.Secret is Owns call 1's type too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			if !errors.Is(err, ErrInvalidRegistration) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrInvalidRegistration naming %q", err, tc.want)
			}
		})
	}
	var _ handler.EventHandler = &shardOwnerHandler{}
}

// shardingConfig is a ring of shards in namespace with the tests' timings.
func shardingConfig(namespace string, shards int) sharding.Config {
	return sharding.Config{Namespace: namespace, Shards: shards, LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry}
}
