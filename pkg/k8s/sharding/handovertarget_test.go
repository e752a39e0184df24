package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestRestartedReplicaHandsNoShardToDeadMember: of 5 replicas of a ring of 30
// shards with the death signal, a1's container is killed; the kubelet reports it
// 500ms later and the others take a1's shards at once; a1's container restarts as
// a2 (a new identity, as a pod's hostname and a UUID give) a little later. a2's first
// look at the members shows a1's member Lease, and a2 follows none of a1's shards
// (the others hold them), so nothing proves to a2 that a1 is dead: it counts a1 live
// until a LeaseDuration after that look. It must not hand a1 a shard: no shard goes
// without owner for more than handoverGap after the report, and every shard of a1's
// is taken within milliseconds of it. (Before hand-overs waited for a member's first
// renewal seen, a2 handed a1 the shards it was given, 2 of 30, and they waited a
// LeaseDuration: a2 took them back when a1 expired in its view.)
func TestRestartedReplicaHandsNoShardToDeadMember(t *testing.T) {
	for _, restart := range []time.Duration{600 * time.Millisecond, 800 * time.Millisecond, time.Second, 1200 * time.Millisecond} {
		t.Run(fmt.Sprint("restart=", restart), func(t *testing.T) { restartAfterReport(t, 500*time.Millisecond, restart) })
	}
}

// restartAfterReport runs TestRestartedReplicaHandsNoShardToDeadMember with the
// report and the restart at the given times after the kill.
func restartAfterReport(t *testing.T, report, restart time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 30
		r := newDeathRing(t, shards)
		defer r.stop()
		k, h, got, run := r.kubelet, r.history, &r.got, r.run
		killA1 := make(chan struct{})
		a1 := run("a1", killA1, func(context.Context) {})
		for _, id := range []string{"b", "c", "d", "e"} {
			run(id, nil, h.OnAcquired(t, id))
		}
		time.Sleep(20 * time.Second)
		ofA1 := a1.Owned()
		if len(ofA1) != shards/5 {
			t.Fatalf("a1 owns %v, want its share of %d shards", ofA1, shards)
		}

		killed := time.Now()
		close(killA1)
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(report)
			k.report("inc-a1")
		})
		wg.Go(func() {
			time.Sleep(restart)
			run("a2", nil, h.OnAcquired(t, "a2"))
		})
		wg.Wait()
		reported := killed.Add(report)
		time.Sleep(4 * testLease)
		for _, st := range ofA1 {
			if at := got.after(st.Shard, killed); at.IsZero() || at.Sub(reported) > promptly {
				t.Errorf("a1's shard %d taken %v after the report, want within %v", st.Shard, at.Sub(reported), promptly)
			}
		}
		h.CheckGaps(t, "a1 killed, restarted as a2", reported, handoverGap)
		h.CheckBalanced(t, "a1's restart", "a2", "b", "c", "d", "e")
		r.stop()
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
	})
}

// TestShardHandedToGoneMemberTakenAtOnce: b and c hand the shards placement gives
// to a new member x to x, but x never takes them (its electors stopped, or it died
// after the hand-over was decided); then x's member Lease is deleted, or marks it
// leaving. b and c count x gone and take its shards within milliseconds, not a
// LeaseDuration after the releases that name x. (Before Liveness.Gone, they waited
// the LeaseDuration out: 3 of 5 scale-downs from 5 to 2 replicas on a real node
// waited a LeaseDuration, the three leavers handing shards to each other.)
func TestShardHandedToGoneMemberTakenAtOnce(t *testing.T) {
	for _, how := range []string{"deleted", "leaving"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shards = 16
				stores := sharding.NewMemoryStores(shards)
				var got takes
				for _, id := range []string{"b", "c"} {
					_, stop := runSharder(t, stores, id, shards, nil, sharding.Callbacks{OnAcquired: got.record})
					defer stop()
				}
				time.Sleep(2 * testLease)
				x := startPhantom(t, stores.Members, "x")
				time.Sleep(time.Second) // b and c hand x its shards; it takes none
				ofX := placedOn(t, shards, []string{"b", "c", "x"}, "x")
				for _, shard := range ofX {
					r, err := stores.Shard(shard).Get(context.Background())
					if err != nil || r.HolderIdentity != "" || r.PreferredHolder != "x" {
						t.Fatalf("shard %d: %+v, %v; want released to x", shard, r, err)
					}
				}
				gone := time.Now()
				if how == "deleted" {
					x.leave(t)
				} else {
					x.halt()
					if _, err := stores.Members.Renew(context.Background(), sharding.MemberLease{Identity: "x",
						LeaseDuration: testLease, State: sharding.MemberLeaving}); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(testLease)
				for _, shard := range ofX {
					if at := got.after(shard, gone); at.IsZero() || at.Sub(gone) > promptly {
						t.Errorf("shard %d handed to x taken %v after x went, want within %v", shard, at.Sub(gone), promptly)
					}
				}
			})
		})
	}
}

// scaleDownGap is the most a scale-down may leave a shard without owner: a shard
// handed to another leaver is taken once the stayers see that leaver's leaving mark,
// and shardingtest.Cut delivers the three leavers' marks one member event at a time,
// each memberLag after the one before.
const scaleDownGap = handoverGap + 2*memberLag

// TestScaleDownTakesEveryShardAtOnce: 5 replicas of a ring of 30 shards, 3 of them
// stopped at once (a scale from 5 to 2; the stops up to 10ms apart): each leaver
// hands its shards to its owner in its view without itself, which may be another
// leaver; no shard goes without owner for more than scaleDownGap, and the 2 that stay
// end balanced. (Before Liveness.Gone, a shard handed to a leaver whose electors had
// stopped waited a LeaseDuration: 3s here.)
func TestScaleDownTakesEveryShardAtOnce(t *testing.T) {
	for _, gap := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond} {
		t.Run(fmt.Sprint("gap=", gap), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shards = 30
				shared := sharding.NewMemoryStores(shards)
				h := shardingtest.NewHistory(shards)
				stops := map[string]func(){}
				ids := []string{"a", "b", "c", "d", "e"}
				for _, id := range ids {
					_, stop := runSharder(t, shardingtest.Cut(shared, nil, memberLag), id, shards, nil,
						sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)})
					stops[id] = stop
				}
				defer func() {
					for _, id := range ids {
						stops[id]()
					}
				}()
				time.Sleep(20 * time.Second)
				h.CheckBalanced(t, "start", ids...)
				from := time.Now()
				var wg sync.WaitGroup
				for i, id := range ids[:3] {
					wg.Go(func() {
						time.Sleep(time.Duration(i) * gap)
						stops[id]()
					})
				}
				wg.Wait()
				time.Sleep(2 * testLease)
				h.CheckGaps(t, "scale from 5 to 2", from, scaleDownGap)
				h.CheckBalanced(t, "scale from 5 to 2", "d", "e")
				for _, id := range ids {
					stops[id]()
				}
				h.CheckNoOverlap(t)
				h.CheckAllEnded(t)
			})
		})
	}
}

// TestYoungLeaverHandsItsShardsOver: c joins a ring of a and b just after their
// member renewals, is handed its share, and leaves before a and b renew again, so
// that it has seen neither write its member Lease while it watched (both are
// unvouched in its view: # Hand-over targets). It must still hand each of its shards
// over, one move at a time, and not leave them to the release of its stop, which
// writes them all at once: on the real API server such a burst made each release as
// slow as the burst (a young replica's leave in test/sharding's BenchmarkShardMoves:
// 13 releases sent within 1ms, answered 17ms later). No shard goes without owner for
// more than handoverGap. (Before, c handed over none: Stats.HandOvers was 0.)
func TestYoungLeaverHandsItsShardsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 16
		stores := sharding.NewMemoryStores(shards)
		h := shardingtest.NewHistory(shards)
		slow := func(c *sharding.Config) { // renewals 2s apart: c lives between two of them
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, c.SettleDelay = 15*time.Second, 10*time.Second, 2*time.Second, 100*time.Millisecond
		}
		for _, id := range []string{"a", "b"} {
			_, stop := runSharder(t, stores, id, shards, slow, sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)})
			defer stop()
		}
		time.Sleep(20*time.Second + 500*time.Millisecond) // a and b renewed at 20s, and renew next at 22s
		c, stopC := runSharder(t, stores, "c", shards, slow, sharding.Callbacks{OnAcquired: h.OnAcquired(t, "c")})
		defer stopC()
		time.Sleep(400 * time.Millisecond)
		led := len(c.Owned())
		if want := len(placedOn(t, shards, []string{"a", "b", "c"}, "c")); led != want {
			t.Fatalf("c leads %d shards before it leaves, want its share %d", led, want)
		}
		from := time.Now()
		stopC()
		if got := c.Stats().HandOvers; got != uint64(led) {
			t.Errorf("c handed over %d of the %d shards it led when it left, want all", got, led)
		}
		time.Sleep(time.Second)
		h.CheckGaps(t, "c's leave", from, handoverGap)
		h.CheckBalanced(t, "c's leave", "a", "b")
	})
}

// TestRestartedReplicaFollowsEarlierDeaths: of 5 replicas of a ring of 30 shards with
// the death signal, a1's container is killed, reported and restarted as a2; two
// seconds later b1's is killed and restarted as b2, which looks at the members before
// the kubelet reports b1. b2's first look shows a1's member Lease, whose death the
// others saw proven, but a1 holds no shard that b2's electors follow: only b2's
// follow of the members' deaths tells it that a1 is dead. b1's shards are all taken
// within a second of b1's report, and none goes without owner for longer than
// handoverGap after it. (Before b2 followed the members, it counted a1 live for a
// LeaseDuration after its first look, placed shards on it that the others placed on
// b2, and left them without owner that long: on a real node, 4 of 8 kills of a
// replica of the sharded example left shards without owner for 8.6 to 15.8s.)
func TestRestartedReplicaFollowsEarlierDeaths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 30
		r := newDeathRing(t, shards)
		defer r.stop()
		k, h, got, run := r.kubelet, r.history, &r.got, r.run
		killA1, killB1 := make(chan struct{}), make(chan struct{})
		run("a1", killA1, func(context.Context) {})
		b1 := run("b1", killB1, func(context.Context) {})
		for _, id := range []string{"c", "d", "e"} {
			run(id, nil, h.OnAcquired(t, id))
		}
		time.Sleep(20 * time.Second)

		close(killA1)
		time.Sleep(500 * time.Millisecond)
		k.report("inc-a1")
		time.Sleep(500 * time.Millisecond)
		run("a2", nil, h.OnAcquired(t, "a2"))
		time.Sleep(2 * time.Second)

		ofB1 := b1.Owned()
		if len(ofB1) == 0 {
			t.Fatal("b1 owns no shard")
		}
		killed := time.Now()
		close(killB1)
		time.Sleep(200 * time.Millisecond)
		run("b2", nil, h.OnAcquired(t, "b2"))
		time.Sleep(300 * time.Millisecond)
		k.report("inc-b1")
		reported := time.Now()
		time.Sleep(4 * testLease)
		for _, st := range ofB1 {
			if at := got.after(st.Shard, killed); at.IsZero() || at.Sub(reported) > time.Second {
				t.Errorf("b1's shard %d taken %v after the report, want within 1s", st.Shard, at.Sub(reported))
			}
		}
		h.CheckGaps(t, "b1 killed, restarted as b2", reported, handoverGap)
		h.CheckBalanced(t, "b1's restart", "a2", "b2", "c", "d", "e")
		r.stop()
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
	})
}

// deathRing is a ring of sharders on shared memory stores with the death signal of a
// fake kubelet: each replica's incarnation is "inc-" and its identity, its member
// Lease seen memberLag late, its takes recorded in got. history records the terms of
// the replicas run with its OnAcquired (not those killed, whose terms end with their
// processes).
type deathRing struct {
	t       *testing.T
	shards  int
	shared  sharding.Stores
	kubelet *fakeKubelet
	history *shardingtest.History
	got     takes
	stops   []func()
}

func newDeathRing(t *testing.T, shards int) *deathRing {
	return &deathRing{t: t, shards: shards, shared: sharding.NewMemoryStores(shards),
		kubelet: newFakeKubelet(), history: shardingtest.NewHistory(shards)}
}

// run starts replica id, cut off its stores once down is closed (nil: never).
func (r *deathRing) run(id string, down <-chan struct{}, onAcquired func(context.Context)) *sharding.Sharder {
	s, stop := runSharder(r.t, shardingtest.Cut(r.shared, down, memberLag), id, r.shards, func(c *sharding.Config) {
		c.Incarnation, c.DeathWatch = "inc-"+id, r.kubelet.watch(id)
	}, sharding.Callbacks{OnAcquired: both(onAcquired, r.got.record)})
	r.stops = append(r.stops, stop)
	return s
}

// stop stops every replica, the last started first; a second call does nothing.
func (r *deathRing) stop() {
	for _, stop := range slices.Backward(r.stops) {
		stop()
	}
	r.stops = nil
}
