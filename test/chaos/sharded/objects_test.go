package sharded

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	crt "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// The objects of a sharded controller with CacheOwnShardsByLabel over the ring (For
// "Owner", Owns "Child"), as each replica's controller sees, labels and reconciles
// them (pkg/integration/controllerruntime: sharded.go, shardowner.go, labelcache.go,
// shardcache.go). The library's decisions there are methods of its controller-runtime
// controller, bound to its informers and client, so the model calls what is public
// and pure: the ring's ShardOf (an owner's shard from its UID, a child's from its
// controller owner's), metav1.GetControllerOf (which of a child's owner references
// decides), ShardLabelKey (the label of a ring shape), and the shard terms of the real
// sharder (OnAcquired's term context); the rules that tie them together (label on
// first sight when the shard is led here, again at a resync or an update; relabel a
// stray seen by a led shard's informer and do not enqueue it; enqueue a child's owner
// only when its shard is led here; admit a request only under a live term of its
// shard) are modelled after those files, and TestShardedLabelCacheRandomized runs the
// library's own against the real API server.

const (
	ringName  = "ring"
	ownerKind = "Owner"
	// labelResync is the labeller's resync (the library's 30s), scaled as the ring's
	// timings are (LeaseDuration 3s for the default 15s).
	labelResync = leaseDur
	// objTick is the period of the controllers' steps; each step is drawn within a
	// seeded offset below netLatency of it, so that no step falls on an instant at
	// which a term begins or ends.
	objTick = 100 * time.Millisecond
)

var (
	ring12   = mustRing(shards)
	ring8    = mustRing(8) // a stale ring shape, whose label a hand may leave
	labelKey = crt.ShardLabelKey(ringName, ring12)
	staleKey = crt.ShardLabelKey(ringName, ring8)
	// labelPrefix starts the labels of every shape of the ring.
	labelPrefix = ringName + "." + crt.ShardLabelDomain + "/"
)

func mustRing(n int) sharding.Ring {
	r, err := sharding.NewRing(n)
	if err != nil {
		panic(err)
	}
	return r
}

// object is an Owner or a Child in the model's API server.
type object struct {
	meta    metav1.ObjectMeta
	child   bool
	version int // bumped by every write that changes it
}

// shardOfMeta returns the shard of an object, as the label cache decides it: an
// owner's UID's, a child's controller owner's UID's when that owner is an Owner; ok is
// false for a child without such a controller owner, which no shard caches.
func shardOfMeta(m *metav1.ObjectMeta, child bool) (int, bool) {
	if !child {
		return ring12.ShardOf(string(m.UID)), true
	}
	c := metav1.GetControllerOf(m)
	if c == nil || c.Kind != ownerKind || c.APIVersion != "v1" {
		return 0, false
	}
	return ring12.ShardOf(string(c.UID)), true
}

// recon is one request admitted to a replica's Reconciler.
type recon struct {
	who   string
	owner types.UID
	shard int
	term  uint64
	at    time.Time
}

// delivery is a child's event that a led shard's informer turned into a request for
// its owner.
type delivery struct {
	who     string
	child   types.UID
	ownerOf int // the owner's shard
	term    uint64
	at      time.Time
}

// labelWrite is one shard label patch that reached the model's API server.
type labelWrite struct {
	obj     types.UID
	who     string
	value   string
	sent    time.Time // when the replica decided it
	at      time.Time // when it was applied
	changed bool      // it changed the object (a patch equal to the labels writes nothing)
}

// finalObject is an object at checkAt.
type finalObject struct {
	uid    types.UID
	child  bool
	meta   metav1.ObjectMeta
	labels map[string]string
}

// objOutcome is what the objects of a history give the checker.
type objOutcome struct {
	recons     []recon
	deliveries []delivery
	writes     []labelWrite
	all        map[types.UID]finalObject // every object created, as created
	final      []finalObject             // the objects at checkAt
	caches     map[string][]types.UID    // each replica run's shard caches at checkAt
	stats      map[string]int            // counters, for the summary
}

// ctl is one run of a replica's controller: the shards it leads (from the real
// sharder's OnAcquired) and what its informers, labeller and queue hold.
type ctl struct {
	run string // id, or id/N for a restart
	n   *node

	// mu guards led and fresh.
	mu    sync.Mutex
	led   map[int]ledTerm
	fresh []int // shards acquired since the last step: their informers list, the backlog is labelled

	// The driver's alone.
	tried   map[types.UID]int         // object version at the last label attempt
	strays  map[types.UID]int         // object version at the last stray relabel
	seen    map[int]map[types.UID]int // per led shard's informer: the versions it delivered
	pending []pendingWrite            // label patches held by a pause
	queue   []types.UID               // owners to reconcile, in order, once each
	resync  time.Time
}

type ledTerm struct {
	term uint64
	ctx  context.Context
}

func newCtl(run string, n *node) *ctl {
	return &ctl{run: run, n: n, led: map[int]ledTerm{}, tried: map[types.UID]int{}, strays: map[types.UID]int{},
		seen: map[int]map[types.UID]int{}}
}

// acquired records a shard term from its OnAcquired until its context ends.
func (c *ctl) acquired(ctx context.Context) {
	st, ok := sharding.ShardTermOf(termctx.Get(ctx))
	if !ok {
		panic("OnAcquired's context carries no shard term")
	}
	c.mu.Lock()
	c.led[st.Shard] = ledTerm{st.Term, ctx}
	c.fresh = append(c.fresh, st.Shard)
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.led[st.Shard].term == st.Term {
			delete(c.led, st.Shard)
		}
	})
}

// leads returns the live term of shard here: the shard led and its term context not
// ended (the library's leads and begin), the process not dead.
func (c *ctl) leads(shard int) (uint64, bool) {
	if !c.n.deathTime().IsZero() {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lt, ok := c.led[shard]
	if !ok || lt.ctx.Err() != nil {
		return 0, false
	}
	return lt.term, true
}

// ledShards returns the shards led here with a live term, in order, and the shards
// acquired since the last call.
func (c *ctl) ledShards() (led, fresh []int) {
	c.mu.Lock()
	fresh, c.fresh = c.fresh, nil
	c.mu.Unlock()
	return c.ledNow(), fresh
}

// ledNow returns the shards led here with a live term, in order.
func (c *ctl) ledNow() (led []int) {
	c.mu.Lock()
	var all []int
	for s := range c.led {
		all = append(all, s)
	}
	c.mu.Unlock()
	slices.Sort(all)
	for _, s := range all {
		if _, ok := c.leads(s); ok {
			led = append(led, s)
		}
	}
	return led
}

func (c *ctl) enqueue(owner types.UID) {
	if !slices.Contains(c.queue, owner) {
		c.queue = append(c.queue, owner)
	}
}

// patchFor returns the label patch the library's patchLabel sends for an object to
// carry shard: the ring's label set to it, the labels of the ring's other shapes
// removed (nil values); empty when the labels are already so.
func patchFor(labels map[string]string, shard int) map[string]*string {
	want := strconv.Itoa(shard)
	out := map[string]*string{}
	if v, ok := labels[labelKey]; !ok || v != want {
		out[labelKey] = &want
	}
	for k := range labels {
		if k != labelKey && strings.HasPrefix(k, labelPrefix) {
			out[k] = nil
		}
	}
	return out
}

// ownerRef is a reference to an Owner; controller makes it the controller's.
func ownerRef(uid types.UID, controller bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: "v1", Kind: ownerKind, Name: string(uid), UID: uid}
	if controller {
		r.Controller = ptr.To(true)
	}
	return r
}
