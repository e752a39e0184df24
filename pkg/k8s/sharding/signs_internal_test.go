package sharding

import (
	"context"
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

// TestMemberSignsPerIncarnation: a member Lease's change is a sign of the
// incarnation it carried and of the one it carries, not of an older one; a delete is
// a sign of the last; before the first view nothing is known, and an incarnation
// never seen has the first view as its sign.
func TestMemberSignsPerIncarnation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemberSigns(realClock{}, NewMemoryMembers(), 3*time.Second)
		if _, known := m.LastSign("a", "a1"); known {
			t.Fatal("a sign known before the first view")
		}
		t0 := time.Now()
		m.observe(t0, []MemberLease{{Identity: "a", Version: "1", Incarnation: "a1"}})
		time.Sleep(time.Second)
		t1 := time.Now()
		m.observe(t1, []MemberLease{{Identity: "a", Version: "2", Incarnation: "a2"}}) // a restart
		time.Sleep(time.Second)
		t2 := time.Now()
		m.observe(t2, []MemberLease{{Identity: "a", Version: "3", Incarnation: "a2"}})
		m.observe(t2.Add(time.Millisecond), []MemberLease{{Identity: "a", Version: "3", Incarnation: "a2"}}) // unchanged
		for _, c := range []struct {
			inc  string
			want time.Time
		}{{"a1", t1}, {"a2", t2}, {"", t2}, {"a0", t0}} {
			if got, _ := m.LastSign("a", c.inc); !got.Equal(c.want) {
				t.Errorf("LastSign(a, %q) = %v, want %v", c.inc, got.Sub(t0), c.want.Sub(t0))
			}
		}
		time.Sleep(time.Second)
		t3 := time.Now()
		m.observe(t3, nil) // deleted
		if got, _ := m.LastSign("a", "a2"); !got.Equal(t3) {
			t.Errorf("after the delete LastSign(a, a2) = %v, want the delete's %v", got.Sub(t0), t3.Sub(t0))
		}
		if got, _ := m.LastSign("a", "a1"); !got.Equal(t1) {
			t.Errorf("after the delete LastSign(a, a1) = %v, want %v", got.Sub(t0), t1.Sub(t0))
		}
	})
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
		m := newMemberSigns(realClock{}, store, ld)
		if _, err := store.Renew(ctx, MemberLease{Identity: "a", Incarnation: "a1"}); err != nil {
			t.Fatal(err)
		}
		events, err := store.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ev := <-events
		m.observe(time.Now(), ev.Members) // the watch shows the first write, then hangs
		sign, _ := m.LastSign("a", "a1")
		time.Sleep(ld)
		if _, err := store.Renew(ctx, MemberLease{Identity: "a", Incarnation: "a1"}); err != nil { // unseen by the watch
			t.Fatal(err)
		}
		quiet, err := m.Confirm(ctx, "a", "a1", sign)
		if err != nil || quiet {
			t.Fatalf("Confirm after an unseen renewal = %v, %v; want not quiet", quiet, err)
		}
		newSign, _ := m.LastSign("a", "a1")
		if !newSign.After(sign) {
			t.Fatalf("LastSign did not move to the read: %v", newSign)
		}
		if quiet, _ := m.Confirm(ctx, "a", "a1", sign); quiet {
			t.Fatal("Confirm with an out-of-date sign reported quiet")
		}
		time.Sleep(ld)
		reads := store.watches.Load()
		if quiet, err := m.Confirm(ctx, "a", "a1", newSign); err != nil || !quiet {
			t.Fatalf("Confirm of a quiet member = %v, %v; want quiet", quiet, err)
		}
		if quiet, err := m.Confirm(ctx, "a", "a1", newSign); err != nil || !quiet {
			t.Fatalf("second Confirm of a quiet member = %v, %v; want quiet", quiet, err)
		}
		if n := store.watches.Load() - reads; n != 1 {
			t.Fatalf("two Confirms of a quiet member read %d times, want once", n)
		}
	})
}
