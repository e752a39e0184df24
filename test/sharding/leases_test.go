package sharding

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// writeKind is what one write of a ring's Lease did.
type writeKind int

const (
	shardRenew   writeKind = iota // the holder renewed its shard Lease
	shardRelease                  // the holder let go (holderIdentity cleared; a hand-over names the next)
	shardTake                     // a replica took the shard (created the Lease, or wrote itself as holder)
	shardHandOff                  // the holder wrote the next in (a one-write hand-over: leaderelection.HandOffs)
	memberJoin                    // a member Lease was created
	memberRenew                   // a member renewed its Lease
	memberLeave                   // a member Lease was deleted
)

// leaseWrite is one write of a ring's Lease, as a watch in the test process saw it:
// every new resourceVersion of a shard or member Lease is one write.
type leaseWrite struct {
	at     time.Time // when the watch delivered it
	kind   writeKind
	shard  int    // for shard Leases
	holder string // the holder after the write ("" after a release), or the member
	from   string // the holder before it
	// transitions is the Lease's leaseTransitions after the write, prevAt when the
	// watch delivered the write before it (zero for the first).
	transitions int32
	prevAt      time.Time
	// stamp is the Lease's renewTime after the write: when its writer sent it, by the
	// writer's clock (the same as the watch's when the replicas run in its process).
	stamp time.Time
}

// leaseLog watches the Leases of one ring and records every write of them. Safe for
// concurrent use.
type leaseLog struct {
	ring string

	// mu guards the fields below.
	mu     sync.Mutex
	writes []leaseWrite
	prev   map[string]coordinationv1.Lease // the last state of each Lease seen
	seenAt map[string]time.Time            // when the watch delivered it
	// others counts the writes of the watched objects other than the ring's Leases
	// (the ConfigMaps of a watchObjects), with when each was seen.
	others []time.Time
}

// watchRing records the writes of ring's Leases in namespace until the returned
// function is called (which waits for the watch to end). The first writes recorded
// are those after the call.
func watchRing(tb testing.TB, cs kubernetes.Interface, namespace, ring string) (*leaseLog, func()) {
	tb.Helper()
	l := &leaseLog{ring: ring, prev: map[string]coordinationv1.Lease{}, seenAt: map[string]time.Time{}}
	leases := cs.CoordinationV1().Leases(namespace)
	list, err := leases.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, lease := range list.Items {
		l.prev[lease.Name] = lease
	}
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() {
		version := list.ResourceVersion
		for ctx.Err() == nil {
			w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: version, AllowWatchBookmarks: true})
			if err != nil {
				if ctx.Err() == nil {
					tb.Errorf("watching the Leases of %s: %v", ring, err)
				}
				return
			}
			for ev := range w.ResultChan() {
				lease, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					continue // an error event: watch again from the last version seen
				}
				version = lease.ResourceVersion
				if ev.Type != watch.Bookmark {
					l.observe(time.Now(), ev.Type, lease)
				}
			}
			w.Stop()
		}
	})
	return l, func() { cancel(); done.Wait() }
}

// watchObjects records in l the time of every write of the ConfigMaps of namespace
// from now on, until the returned function is called.
func (l *leaseLog) watchObjects(tb testing.TB, cs kubernetes.Interface, namespace string) func() {
	tb.Helper()
	cms := cs.CoreV1().ConfigMaps(namespace)
	list, err := cms.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	var done sync.WaitGroup
	done.Go(func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
				l.mu.Lock()
				l.others = append(l.others, time.Now())
				l.mu.Unlock()
			}
		}
		if ctx.Err() == nil {
			tb.Errorf("the watch of the ConfigMaps of %s ended early: object writes may be missed", namespace)
		}
	})
	return func() { cancel(); done.Wait() }
}

// observe classifies one watch event of a Lease.
func (l *leaseLog) observe(at time.Time, t watch.EventType, lease *coordinationv1.Lease) {
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, seen := l.prev[lease.Name]
	if t == watch.Deleted {
		delete(l.prev, lease.Name)
	} else {
		l.prev[lease.Name] = *lease
	}
	if seen && prev.ResourceVersion == lease.ResourceVersion && t != watch.Deleted {
		return // the same write again (a watch resumed)
	}
	if id, ok := strings.CutPrefix(lease.Name, l.ring+"-member-"); ok {
		kind := memberRenew
		switch {
		case t == watch.Deleted:
			kind = memberLeave
		case !seen:
			kind = memberJoin
		}
		l.writes = append(l.writes, leaseWrite{at: at, kind: kind, holder: id})
		return
	}
	s, ok := strings.CutPrefix(lease.Name, l.ring+"-shard-")
	shard, err := strconv.Atoi(s)
	if !ok || err != nil || t == watch.Deleted {
		return
	}
	prevHolder := ""
	if seen && prev.Spec.HolderIdentity != nil {
		prevHolder = *prev.Spec.HolderIdentity
	}
	kind := shardTake
	switch {
	case holder == "":
		kind = shardRelease
	case strings.HasPrefix(lease.Annotations[leaderelection.MarkerAnnotation], "handoff:"):
		kind = shardHandOff
	case seen && holder == prevHolder && transitions(prev) == transitions(*lease):
		kind = shardRenew
	}
	l.writes = append(l.writes, leaseWrite{at: at, kind: kind, shard: shard, holder: holder, from: prevHolder,
		transitions: transitions(*lease), prevAt: l.seenAt[lease.Name], stamp: renewTime(lease)})
	l.seenAt[lease.Name] = at
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

func transitions(l coordinationv1.Lease) int32 {
	if l.Spec.LeaseTransitions == nil {
		return 0
	}
	return *l.Spec.LeaseTransitions
}

// snapshot returns the writes recorded so far, and the times of the object writes.
func (l *leaseLog) snapshot() ([]leaseWrite, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes), slices.Clone(l.others)
}

// holders returns the holder of each shard after the writes up to at ("" for a
// released or never seen shard). The watch must have begun before the ring's first
// write.
func holders(writes []leaseWrite, at time.Time) map[int]string {
	out := map[int]string{}
	for _, w := range writes {
		if w.at.After(at) {
			break
		}
		if w.kind == shardRelease || w.kind == shardTake || w.kind == shardRenew || w.kind == shardHandOff {
			out[w.shard] = w.holder
		}
	}
	return out
}

// balancedAt returns the first moment from from on at which, by the writes (all of
// them since the ring began), every one of shards shards is held by one of members
// and none holds more than ceil(shards/len(members)).
func balancedAt(writes []leaseWrite, from time.Time, shards int, members []string) (time.Time, bool) {
	holder := map[int]string{}
	limit := (shards + len(members) - 1) / len(members)
	balanced := func() bool {
		count := map[string]int{}
		for shard := range shards {
			h := holder[shard]
			if !slices.Contains(members, h) {
				return false
			}
			count[h]++
			if count[h] > limit {
				return false
			}
		}
		return true
	}
	checked := false // whether the state as of from was checked
	for _, w := range writes {
		if !checked && !w.at.Before(from) {
			checked = true
			if balanced() {
				return from, true
			}
		}
		if w.kind == shardRelease || w.kind == shardTake || w.kind == shardRenew || w.kind == shardHandOff {
			holder[w.shard] = w.holder
		}
		if checked && balanced() {
			return w.at, true
		}
	}
	if !checked && balanced() {
		return from, true
	}
	return time.Time{}, false
}

// windowCounts are the writes of a window of time.
type windowCounts struct {
	shardMoves  int // releases, takes and hand-offs of shard Leases
	taken       int // takes and hand-offs: the shards that changed owner
	shardRenews int
	memberMoves int // member Leases created or deleted
	memberRenew int
	objects     int // writes of the ConfigMaps
	movedShards map[int]bool
}

// count returns the writes of [from, to), but for the takes of shards released
// before from (the end of a move that began before).
func count(writes []leaseWrite, objects []time.Time, from, to time.Time) windowCounts {
	c := windowCounts{movedShards: map[int]bool{}}
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	releasedBefore := map[int]bool{} // released before from and not taken since
	for _, w := range writes {
		switch w.kind {
		case shardRelease:
			releasedBefore[w.shard] = w.at.Before(from)
		case shardTake:
			before := releasedBefore[w.shard]
			delete(releasedBefore, w.shard)
			if before {
				continue
			}
		}
		if !in(w.at) {
			continue
		}
		switch w.kind {
		case shardRenew:
			c.shardRenews++
		case shardRelease:
			c.shardMoves++
		case shardTake, shardHandOff:
			c.shardMoves++
			c.taken++
			c.movedShards[w.shard] = true
		case memberJoin, memberLeave:
			c.memberMoves++
		case memberRenew:
			c.memberRenew++
		}
	}
	for _, t := range objects {
		if in(t) {
			c.objects++
		}
	}
	return c
}

// handovers returns, for every release of a shard in [from, to), the time from the
// release to the next take of that shard as the watch saw them (seen) and as their
// writers stamped them when they sent them (stamped), and the takes in the window
// that followed no release (a Lease taken from a holder that stopped renewing). A
// take of a shard released before from is in none. A release never taken counts
// as ownerless until to, both ways. arrived has, for each, the time from the
// release's send (its renewTime) to the take's delivery: the old owner's write to the
// new owner's arrival, as this watch saw it. A one-write hand-over (shardHandOff)
// counts, all three ways, from its send to the watch's delivery: the new owner's term
// starts on its own watch's delivery of it.
func handovers(writes []leaseWrite, from, to time.Time) (seen, stamped, arrived []time.Duration, unreleased []leaseWrite) {
	released := map[int]leaseWrite{}
	for _, w := range writes {
		switch w.kind {
		case shardRelease:
			released[w.shard] = w
		case shardHandOff:
			delete(released, w.shard)
			if !w.at.Before(from) && w.at.Before(to) {
				seen = append(seen, w.at.Sub(w.stamp))
				stamped = append(stamped, w.at.Sub(w.stamp))
				arrived = append(arrived, w.at.Sub(w.stamp))
			}
		case shardTake:
			r, ok := released[w.shard]
			delete(released, w.shard)
			switch {
			case ok && !r.at.Before(from) && r.at.Before(to):
				seen = append(seen, w.at.Sub(r.at))
				stamped = append(stamped, w.stamp.Sub(r.stamp))
				arrived = append(arrived, w.at.Sub(r.stamp))
			case !ok && !w.at.Before(from) && w.at.Before(to):
				unreleased = append(unreleased, w)
			}
		}
	}
	for _, r := range released {
		if !r.at.Before(from) && r.at.Before(to) {
			seen = append(seen, to.Sub(r.at))
			stamped = append(stamped, to.Sub(r.stamp))
			arrived = append(arrived, to.Sub(r.stamp))
		}
	}
	slices.Sort(seen)
	slices.Sort(stamped)
	slices.Sort(arrived)
	return seen, stamped, arrived, unreleased
}

// TestLeaseWriteAccounting: the benchmark's sums over a window of Lease writes. A
// move is a release and a take; a take of a shard released before the window is the
// end of an earlier move and counts in neither; a take without a release is
// reported apart; renewals and object writes are counted apart; the shards are
// balanced from the write that made them so.
func TestLeaseWriteAccounting(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	// Each write stamped 5ms before the watch delivered it.
	w := func(ms int, kind writeKind, shard int, holder string) leaseWrite {
		return leaseWrite{at: at(ms), kind: kind, shard: shard, holder: holder, stamp: at(ms - 5)}
	}
	writes := []leaseWrite{
		w(0, shardTake, 0, "a"), w(0, shardTake, 1, "a"), w(0, shardTake, 2, "a"),
		w(90, shardRelease, 2, ""), // a move begun before the window
		w(100, memberJoin, 0, "b"),
		w(101, shardTake, 2, "b"), // ... ending in it
		w(110, shardRenew, 0, "a"),
		w(120, shardRelease, 1, ""),
		w(150, shardTake, 1, "b"), // a move of 30ms
		w(151, shardRenew, 1, "b"),
		w(160, shardTake, 0, "b"), // a take without a release
		w(170, memberRenew, 0, "b"),
		w(300, shardRelease, 0, ""), // after the window
	}
	objects := []time.Time{at(50), at(130)}
	c := count(writes, objects, at(100), at(200))
	if c.shardMoves != 3 || c.taken != 2 || c.shardRenews != 2 || c.memberMoves != 1 || c.memberRenew != 1 || c.objects != 1 {
		t.Errorf("count: %+v, want 3 shard moves (2 taken), 2 shard renewals, 1 member move, 1 member renewal, 1 object write", c)
	}
	if !c.movedShards[0] || !c.movedShards[1] || c.movedShards[2] {
		t.Errorf("moved shards %v, want 0 and 1", c.movedShards)
	}
	writes[8].stamp = at(140) // the take sent 10ms earlier than the others' lag
	gaps, stamped, arrived, unreleased := handovers(writes, at(100), at(200))
	if len(gaps) != 1 || gaps[0] != 30*time.Millisecond || len(stamped) != 1 || stamped[0] != 25*time.Millisecond ||
		len(arrived) != 1 || arrived[0] != 35*time.Millisecond {
		t.Errorf("handovers: seen %v, stamped %v, arrived %v, want one of 30ms seen, 25ms stamped, 35ms arrived", gaps, stamped, arrived)
	}
	if len(unreleased) != 1 || unreleased[0].shard != 0 {
		t.Errorf("takes without release: %v, want shard 0's", unreleased)
	}
	gaps, _, _, _ = handovers(writes, at(250), at(400))
	if len(gaps) != 1 || gaps[0] != 100*time.Millisecond {
		t.Errorf("a release never taken: %v, want an ownerless time to the window's end (100ms)", gaps)
	}
	handOff := append(slices.Clone(writes), w(320, shardHandOff, 2, "a"))
	if _, _, arrived, unreleased := handovers(handOff, at(310), at(400)); len(arrived) != 1 || arrived[0] != 5*time.Millisecond || len(unreleased) != 0 {
		t.Errorf("a hand-off: arrived %v, unreleased %v; want 5ms from its send to its delivery, and no take without a release", arrived, unreleased)
	}
	if c := count(handOff, nil, at(310), at(400)); c.shardMoves != 1 || c.taken != 1 || !c.movedShards[2] {
		t.Errorf("a hand-off: %+v, want one shard move, shard 2 moved", c)
	}
	if got, ok := balancedAt(writes, at(100), 3, []string{"a", "b"}); !ok || !got.Equal(at(101)) {
		t.Errorf("balanced from 100ms at %v %v, want at 101ms (a holds 0 and 1, b 2)", got.Sub(at(0)), ok)
	}
	if got, ok := balancedAt(writes, at(125), 3, []string{"a", "b"}); !ok || !got.Equal(at(150)) {
		t.Errorf("balanced from 125ms at %v %v, want at 150ms (shard 1 released at 120ms, taken at 150ms)", got.Sub(at(0)), ok)
	}
	if _, ok := balancedAt(writes, at(100), 3, []string{"a", "b", "c"}); ok {
		t.Error("balanced over a, b and c, which holds nothing")
	}
	if h := holders(writes, at(125)); h[0] != "a" || h[1] != "" || h[2] != "b" {
		t.Errorf("holders at 125ms: %v, want a, none, b", h)
	}
}
