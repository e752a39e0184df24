package sharded

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// world is the model's API server of Owners and Children, with the controllers of
// every replica run, stepped by one goroutine (run): the objects' faults and every
// controller's step happen there, in a seeded order, at instants drawn so that none
// falls on one at which a term begins or ends. So a seed replays.
type world struct {
	rng   *rand.Rand
	begin time.Time
	// The driver's alone.
	objs    map[types.UID]*object
	order   []types.UID          // creation order, for a seeded iteration
	refused map[string]time.Time // replica id -> until when its label writes are refused
	lossy   map[string]time.Time // replica id -> until when the replies of its label writes are lost
	slow    map[string]time.Time // replica id -> until when its label writes take 0.2 to 2s
	later   []objEvent           // events the faults scheduled (an owner after its child)
	made    int
	out     objOutcome
	faults  map[string]int
	log     []string

	// mu guards ctls: runs start on the schedule's goroutine and restarts' timers.
	mu   sync.Mutex
	ctls []*ctl
}

// objEvent is one step of the objects' schedule, at an offset from the start.
type objEvent struct {
	at time.Duration
	do func(now time.Time)
}

func newWorld(seed uint64, begin time.Time) *world {
	w := &world{rng: rand.New(rand.NewPCG(seed, 0x0b1ec75)), begin: begin, objs: map[types.UID]*object{},
		refused: map[string]time.Time{}, lossy: map[string]time.Time{}, slow: map[string]time.Time{}, faults: map[string]int{}}
	w.out.stats = map[string]int{}
	w.out.all = map[types.UID]finalObject{}
	w.out.caches = map[string][]types.UID{}
	for range 6 {
		w.createFamily(begin)
	}
	w.createLoose(begin)
	return w
}

// add registers a replica run's controller.
func (w *world) add(c *ctl) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctls = append(w.ctls, c)
}

// runs returns the controllers, in the order of their runs' names.
func (w *world) runs() []*ctl {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.ctls)
	slices.SortFunc(out, func(a, b *ctl) int { return strings.Compare(a.run, b.run) })
	return out
}

func (w *world) logf(now time.Time, format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%v %s", now.Sub(w.begin), fmt.Sprintf(format, args...)))
}

func (w *world) uid() types.UID {
	w.made++
	return types.UID(fmt.Sprintf("%08x-%04x-obj-%d", w.rng.Uint32(), w.rng.IntN(1<<16), w.made))
}

func (w *world) create(m metav1.ObjectMeta, child bool) {
	if m.Name == "" {
		m.Name = string(m.UID)
	}
	w.objs[m.UID] = &object{meta: m, child: child, version: 1}
	w.order = append(w.order, m.UID)
	w.out.all[m.UID] = finalObject{uid: m.UID, child: child, meta: *m.DeepCopy()}
	if child {
		w.out.stats["children"]++
	} else {
		w.out.stats["owners"]++
	}
}

// createFamily creates an Owner with 0 to 2 Children it controls; a Child may also
// carry a reference (not the controller's) to another Owner.
func (w *world) createFamily(now time.Time) types.UID {
	owner := w.uid()
	w.create(metav1.ObjectMeta{UID: owner}, false)
	for range w.rng.IntN(3) {
		refs := []metav1.OwnerReference{ownerRef(owner, true)}
		if other := w.pick(false, nil); other != "" && w.rng.IntN(3) == 0 {
			refs = append([]metav1.OwnerReference{ownerRef(other, false)}, refs...)
		}
		w.create(metav1.ObjectMeta{UID: w.uid(), OwnerReferences: refs}, true)
	}
	return owner
}

// createLoose creates a Child that no shard caches: only a reference that is not the
// controller's, or a controller of another kind.
func (w *world) createLoose(now time.Time) {
	other := w.pick(false, nil)
	ref := ownerRef(other, false)
	if other == "" || w.rng.IntN(2) == 0 {
		ref = metav1.OwnerReference{APIVersion: "v1", Kind: "Other", Name: "x", UID: w.uid(), Controller: ptr.To(true)}
	}
	w.create(metav1.ObjectMeta{UID: w.uid(), OwnerReferences: []metav1.OwnerReference{ref}}, true)
}

// pick returns a live object, an owner or a child, that ok accepts (nil: any); "" if none.
func (w *world) pick(child bool, ok func(*object) bool) types.UID {
	var out []types.UID
	for _, uid := range w.order {
		if o := w.objs[uid]; o != nil && o.child == child && (ok == nil || ok(o)) {
			out = append(out, uid)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return out[w.rng.IntN(len(out))]
}

// labelled accepts an object that carries the ring's label.
func labelled(o *object) bool { _, ok := o.meta.Labels[labelKey]; return ok }

// sharded accepts an object some shard caches.
func sharded(o *object) bool { _, ok := shardOfMeta(&o.meta, o.child); return ok }

// setLabels writes an object's labels by hand (a fault): f edits a copy.
func (w *world) setLabels(uid types.UID, f func(map[string]string)) {
	o := w.objs[uid]
	labels := maps.Clone(o.meta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	f(labels)
	o.meta.Labels = labels
	o.version++
}

// replicaOf is the replica id of a run's name.
func replicaOf(run string) string { id, _, _ := strings.Cut(run, "/"); return id }

// schedule draws the objects' faults, at seeded instants of the fault phase, each
// window ending by the heal.
func (w *world) schedule() []objEvent {
	heal := warmUp + faultPhase
	var evs []objEvent
	for range 16 + w.rng.IntN(16) {
		at, k := warmUp+time.Duration(w.rng.Int64N(int64(faultPhase))), w.rng.IntN(13)
		d := min(leaseDur/4+time.Duration(w.rng.Int64N(int64(2*leaseDur))), heal-at)
		evs = append(evs, objEvent{at: at, do: func(now time.Time) { w.fault(now, k, d) }})
	}
	slices.SortStableFunc(evs, func(a, b objEvent) int { return int(a.at - b.at) })
	return evs
}

// fault applies the objects' fault of kind k at now (a window lasting d).
func (w *world) fault(now time.Time, k int, d time.Duration) {
	switch k {
	case 0, 1:
		w.faults["owner created"]++
		w.logf(now, "create owner %s", w.createFamily(now))
	case 2:
		w.childFirst(now)
	case 3:
		if uid := w.pick(false, nil); uid != "" {
			w.faults["owner deleted"]++
			delete(w.objs, uid)
			w.logf(now, "delete owner %s (its children stay)", uid)
		}
	case 4:
		if uid := w.pick(true, nil); uid != "" {
			w.faults["child deleted"]++
			delete(w.objs, uid)
			w.logf(now, "delete child %s", uid)
		}
	case 5:
		if uid := w.pick(w.rng.IntN(2) == 0, nil); uid != "" {
			w.objs[uid].version++
			w.logf(now, "update %s", uid)
		}
	case 6:
		w.faults["loose child"]++
		w.createLoose(now)
		w.logf(now, "create a child no shard caches")
	case 7, 8, 9:
		w.labelFault(now, k)
	default:
		w.writeFault(now, k-10, d)
	}
}

// childFirst creates a Child whose controller owner is created 0.2 to 2s later: its
// events name an owner not yet seen.
func (w *world) childFirst(now time.Time) {
	owner, child := w.uid(), w.uid()
	w.faults["child before owner"]++
	w.create(metav1.ObjectMeta{UID: child, OwnerReferences: []metav1.OwnerReference{ownerRef(owner, true)}}, true)
	d := 200*time.Millisecond + time.Duration(w.rng.Int64N(int64(1800*time.Millisecond)))
	at := min(now.Add(d).Sub(w.begin), warmUp+faultPhase)
	w.logf(now, "create child %s of owner %s, created %v later", child, owner, at-now.Sub(w.begin))
	w.later = append(w.later, objEvent{at: at, do: func(now time.Time) {
		w.create(metav1.ObjectMeta{UID: owner}, false)
		w.logf(now, "create owner %s after its child", owner)
	}})
	slices.SortStableFunc(w.later, func(a, b objEvent) int { return int(a.at - b.at) })
}

// labelFault edits a sharded object's label by hand: removes it (7), sets another
// shard (8), or leaves only the label of a stale ring shape (9).
func (w *world) labelFault(now time.Time, k int) {
	uid := w.pick(w.rng.IntN(2) == 0, sharded)
	if uid == "" {
		return
	}
	own, _ := shardOfMeta(&w.objs[uid].meta, w.objs[uid].child)
	switch k {
	case 7:
		w.faults["label removed"]++
		w.setLabels(uid, func(l map[string]string) { delete(l, labelKey) })
		w.logf(now, "remove the label of %s", uid)
	case 8:
		wrong := strconv.Itoa((own + 1 + w.rng.IntN(shards-1)) % shards)
		w.faults["label wrong"]++
		w.setLabels(uid, func(l map[string]string) { l[labelKey] = wrong })
		w.logf(now, "label %s with shard %s, not %d", uid, wrong, own)
	default:
		stale := strconv.Itoa(w.rng.IntN(ring8.Shards()))
		w.faults["label of a stale shape"]++
		w.setLabels(uid, func(l map[string]string) { delete(l, labelKey); l[staleKey] = stale })
		w.logf(now, "label %s with the stale shape's %s=%s only", uid, staleKey, stale)
	}
}

// writeFault, for d, makes a replica's label writes refused (k 0), or their replies
// lost (k 1: applied, the replica told they failed), or slow (k 2: each lands 0.2 to
// 2s after it was sent, as the shards move); with two new owners and their children,
// whose labels the replica may have to write meanwhile.
func (w *world) writeFault(now time.Time, k int, d time.Duration) {
	runs := w.runs()
	if len(runs) == 0 {
		return
	}
	id := replicaOf(runs[w.rng.IntN(len(runs))].run)
	kind, until := [...]string{"label writes refused", "label replies lost", "label writes slow"}[k], w.refused
	switch k {
	case 1:
		until = w.lossy
	case 2:
		until = w.slow
	}
	w.faults[kind]++
	until[id] = now.Add(d)
	w.logf(now, "%s: %s for %v, with owners %s and %s", kind, id, d, w.createFamily(now), w.createFamily(now))
}
