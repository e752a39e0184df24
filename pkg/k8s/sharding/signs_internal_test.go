package sharding

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// countingWatch counts the Watch calls of a MemberStore (each a fresh read).
type countingWatch struct {
	MemberStore
	watches atomic.Int64
}

func (c *countingWatch) Watch(ctx context.Context) (<-chan MemberEvent, error) {
	c.watches.Add(1)
	return c.MemberStore.Watch(ctx)
}

// TestMemberSignsPerIncarnation: a member Lease's change is a sign, for each shard
// it claimed before or claims after, of the incarnation that claimed it, not of an
// older one, nor for a shard it never claimed; a delete is a sign of the last claims;
// before the first view nothing is known, and an incarnation never seen has the
// first view as its sign.
func TestMemberSignsPerIncarnation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemberSigns(realClock{}, NewMemoryMembers(), 8, 3*time.Second)
		sign := func(inc string, shard int) time.Time {
			at, _ := shardLiveness{m: m, shard: shard}.LastSign("a", inc)
			return at
		}
		if _, known := (shardLiveness{m: m, shard: 0}).LastSign("a", "a1"); known {
			t.Fatal("a sign known before the first view")
		}
		t0 := time.Now()
		m.observe(t0, []MemberLease{{Identity: "a", Version: "1", Incarnation: "a1", Shards: "0-1"}})
		time.Sleep(time.Second)
		t1 := time.Now()
		m.observe(t1, []MemberLease{{Identity: "a", Version: "2", Incarnation: "a1", Shards: "1"}}) // shard 0's term ended
		time.Sleep(time.Second)
		t2 := time.Now()
		m.observe(t2, []MemberLease{{Identity: "a", Version: "3", Incarnation: "a2"}}) // a restart, claiming nothing
		time.Sleep(time.Second)
		t3 := time.Now()
		m.observe(t3, []MemberLease{{Identity: "a", Version: "4", Incarnation: "a2", Shards: "2"}})
		m.observe(t3.Add(time.Second), []MemberLease{{Identity: "a", Version: "4", Incarnation: "a2", Shards: "2"}}) // unchanged
		for _, c := range []struct {
			inc   string
			shard int
			want  time.Time
		}{
			{"a1", 0, t1}, // its last claim, seen when it went
			{"a1", 1, t2}, // claimed until the restart
			{"a2", 2, t3},
			{"", 2, t3},
			{"a2", 0, t0}, // never claimed by a2: the first view
			{"a0", 5, t0},
		} {
			if got := sign(c.inc, c.shard); !got.Equal(c.want) {
				t.Errorf("LastSign(a, %q) of shard %d = %v, want %v", c.inc, c.shard, got.Sub(t0), c.want.Sub(t0))
			}
		}
		time.Sleep(time.Second)
		t4 := time.Now()
		m.observe(t4, nil) // deleted
		if got := sign("a2", 2); !got.Equal(t4) {
			t.Errorf("after the delete LastSign(a, a2) of shard 2 = %v, want the delete's %v", got.Sub(t0), t4.Sub(t0))
		}
		if got := sign("a1", 1); !got.Equal(t2) {
			t.Errorf("after the delete LastSign(a, a1) of shard 1 = %v, want %v", got.Sub(t0), t2.Sub(t0))
		}
	})
}

// TestShardClaims: claims round-trip as ranges; one that cannot be read claims every
// shard.
func TestShardClaims(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{nil, ""}, {[]int{3}, "3"}, {[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"}} {
		got := formatShards(c.in)
		if got != c.want {
			t.Errorf("formatShards(%v) = %q, want %q", c.in, got, c.want)
		}
		if back := claimedShards(got, 16); !slices.Equal(back, c.in) {
			t.Errorf("claimedShards(%q) = %v, want %v", got, back, c.in)
		}
	}
	for _, bad := range []string{"x", "3-1", "16", "-1", "1,,2"} {
		if got := claimedShards(bad, 16); len(got) != 16 {
			t.Errorf("claimedShards(%q) = %v, want every shard", bad, got)
		}
	}
}

// TestMemberSignsConfirm: Confirm reads the members afresh and finds a renewal the
// watch had not shown (not quiet, and LastSign moves to the read); it answers not
// quiet at once for a caller whose sign is out of date; a quiet read sent a
// LeaseDuration after the sign answers later calls without another read while the
// Lease stays as it showed.
func TestMemberSignsConfirm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // ends the hanging watch
		const ld = 3 * time.Second
		store := &countingWatch{MemberStore: NewMemoryMembers()}
		m := newMemberSigns(realClock{}, store, 4, ld)
		l := shardLiveness{m: m, shard: 1}
		if _, err := store.Renew(ctx, MemberLease{Identity: "a", Incarnation: "a1", Shards: "1"}); err != nil {
			t.Fatal(err)
		}
		events, err := store.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ev := <-events
		m.observe(time.Now(), ev.Members) // the watch shows the first write, then hangs
		sign, _ := l.LastSign("a", "a1")
		time.Sleep(ld)
		if _, err := store.Renew(ctx, MemberLease{Identity: "a", Incarnation: "a1", Shards: "1"}); err != nil { // unseen by the watch
			t.Fatal(err)
		}
		quiet, err := l.Confirm(ctx, "a", "a1", sign)
		if err != nil || quiet {
			t.Fatalf("Confirm after an unseen renewal = %v, %v; want not quiet", quiet, err)
		}
		newSign, _ := l.LastSign("a", "a1")
		if !newSign.After(sign) {
			t.Fatalf("LastSign did not move to the read: %v", newSign)
		}
		if quiet, _ := l.Confirm(ctx, "a", "a1", sign); quiet {
			t.Fatal("Confirm with an out-of-date sign reported quiet")
		}
		time.Sleep(ld)
		reads := store.watches.Load()
		if quiet, err := l.Confirm(ctx, "a", "a1", newSign); err != nil || !quiet {
			t.Fatalf("Confirm of a quiet member = %v, %v; want quiet", quiet, err)
		}
		if quiet, err := l.Confirm(ctx, "a", "a1", newSign); err != nil || !quiet {
			t.Fatalf("second Confirm of a quiet member = %v, %v; want quiet", quiet, err)
		}
		if n := store.watches.Load() - reads; n != 1 {
			t.Fatalf("two Confirms of a quiet member read %d times, want once", n)
		}
	})
}

// TestMemberSignsHandOffs: a hand-off names holder only a member whose Lease, as last
// seen, is active, records an incarnation and takes hand-offs (a member of a Baton
// version before them gets a release), and cites the version seen; Left reports a
// member leaving in the asked incarnation without claiming the shard, and nothing
// else; Cited gives the send of this run's own writes only.
func TestMemberSignsHandOffs(t *testing.T) {
	m := newMemberSigns(realClock{}, NewMemoryMembers(), 8, 3*time.Second)
	now := time.Now()
	m.observe(now, []MemberLease{
		{Identity: "new", Version: "7", Incarnation: "n1", HandOffs: true},
		{Identity: "old", Version: "8", Incarnation: "o1"},
		{Identity: "going", Version: "9", Incarnation: "g1", HandOffs: true, State: MemberLeaving, Shards: "2"},
	})
	l := func(shard int) shardLiveness {
		return shardLiveness{m: m, shard: shard, handOffTo: func(string) bool { return true }}
	}
	if inc, cite, ok := l(0).HandOff("new"); !ok || inc != "n1" || cite != "7" {
		t.Errorf("HandOff(new) = %q, %q, %v; want n1, 7, true", inc, cite, ok)
	}
	for _, id := range []string{"old", "going", "absent"} {
		if _, _, ok := l(0).HandOff(id); ok {
			t.Errorf("HandOff(%s) named it holder", id)
		}
	}
	if _, _, ok := (shardLiveness{m: m}).HandOff("new"); ok {
		t.Error("HandOff named a holder without a handOffTo")
	}
	if !l(0).Left("going", "g1") || l(2).Left("going", "g1") || l(0).Left("going", "g0") || l(0).Left("new", "n1") {
		t.Error("Left: want true only for the leaving member's incarnation and a shard it does not claim")
	}
	m.wrote("41", now)
	if at, ok := l(0).Cited("41"); !ok || !at.Equal(now) {
		t.Errorf("Cited(41) = %v, %v; want the send", at, ok)
	}
	if _, ok := l(0).Cited("7"); ok {
		t.Error("Cited a version this run never wrote")
	}
	for i := range ownWritesKept {
		m.wrote(strconv.Itoa(100+i), now)
	}
	if _, ok := l(0).Cited("41"); ok {
		t.Errorf("Cited a write older than the last %d", ownWritesKept)
	}
}
