package leaderelection

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
)

func followOnly(c *Config) { c.FollowOnly = true }

// promptly is how soon an elector allowed to campaign must take a lease that what it
// followed lets it take: the store's latency is 1ms, so a few writes' worth.
const promptly = 10 * time.Millisecond

// requireNoWrites fails unless c's elector sent no Create and no Update.
func requireNoWrites(t *testing.T, c *candidate, when string) {
	t.Helper()
	if n := c.store.count("Create") + c.store.count("Update"); n != 0 {
		t.Fatalf("%s: %s sent %d writes while following only, want none (%v)", when, c.id, n, c.store.counts())
	}
	if c.e.IsLeader() {
		t.Fatalf("%s: %s leads while following only", when, c.id)
	}
}

// tookWithin fails unless c's first term started within limit of since.
func tookWithin(t *testing.T, c *candidate, since time.Time, limit time.Duration) {
	t.Helper()
	_, started, _, _ := c.snapshot()
	if len(started) == 0 {
		t.Fatalf("%s never led", c.id)
	}
	if took := started[0].Sub(since); took > limit {
		t.Fatalf("%s led %v after it was allowed to campaign, want at most %v", c.id, took, limit)
	}
}

// TestFollowOnlyAbsentLease: a FollowOnly elector on an absent lease writes nothing
// for two LeaseDurations, and once allowed creates the lease at once: it followed the
// absence since its first look (a cold start), and no refused write made it look
// again as after a failed Create.
func TestFollowOnlyAbsentLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		b := cl.start("b", followOnly)
		time.Sleep(2 * DefaultLeaseDuration)
		select {
		case <-b.e.Synced():
		default:
			t.Fatal("Synced not closed after two LeaseDurations of following")
		}
		requireNoWrites(t, b, "absent lease")
		allowed := time.Now()
		b.e.SetCampaigning(true)
		cl.waitLeader(nil, time.Second)
		tookWithin(t, b, allowed, promptly)
	})
}

// TestFollowOnlyRelease: a FollowOnly elector that saw the lease released while it
// followed takes it at once when allowed, not a LeaseDuration later (what a release
// seen on a first look waits), and not at its next retry.
func TestFollowOnlyRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", func(c *Config) { c.ReleaseOnCancel = true })
		time.Sleep(time.Second)
		b := cl.start("b", followOnly)
		time.Sleep(time.Second)
		a.cancel() // a releases the lease
		<-a.done
		time.Sleep(2 * DefaultLeaseDuration)
		requireNoWrites(t, b, "released lease")
		if r, err := cl.mem.Get(context.Background()); err != nil || r.HolderIdentity != "" {
			t.Fatalf("lease %+v, %v; want released", r, err)
		}
		allowed := time.Now()
		b.e.SetCampaigning(true)
		cl.waitLeader(nil, time.Second)
		tookWithin(t, b, allowed, promptly)
	})
}

// TestFollowOnlyFirstLookStillWaits: following does not lift the first-look rule. An
// elector whose first look sees a release (maybe a restored copy of an old state)
// waits a LeaseDuration from that look, whether it was allowed to campaign then or
// only later; allowed after the wait, it takes the lease at once.
func TestFollowOnlyFirstLookStillWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", func(c *Config) { c.ReleaseOnCancel = true })
		time.Sleep(time.Second)
		a.cancel()
		<-a.done

		// b looks first at the release, is allowed half a LeaseDuration later.
		b := cl.start("b", followOnly)
		firstLook := time.Now()
		time.Sleep(DefaultLeaseDuration / 2)
		b.e.SetCampaigning(true)
		time.Sleep(DefaultLeaseDuration/2 - 100*time.Millisecond)
		if b.e.IsLeader() {
			t.Fatalf("b leads %v after its first look saw a release, want a LeaseDuration's wait", time.Since(firstLook))
		}
		cl.waitLeader(nil, time.Second)
		tookWithin(t, b, firstLook, DefaultLeaseDuration+promptly)

		// b releases; c's first look sees it, c follows for two LeaseDurations and
		// takes it at once when allowed: the wait ran while it followed.
		b.cancel()
		<-b.done
		c := cl.start("c", func(c *Config) { c.FollowOnly, c.ReleaseOnCancel = true, true })
		time.Sleep(2 * DefaultLeaseDuration)
		requireNoWrites(t, c, "released lease seen on a first look")
		allowed := time.Now()
		c.e.SetCampaigning(true)
		cl.waitLeader(nil, time.Second)
		tookWithin(t, c, allowed, promptly)
	})
}

// TestFollowOnlyTakesHandOver: a FollowOnly elector takes a lease handed over to it
// (a release naming it preferredHolder) as any elector does, at once; it does not end
// its term when told to follow only, and after its term it makes no acquiring write.
func TestFollowOnlyTakesHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", followOnly)
		time.Sleep(time.Second)
		handed := time.Now()
		if err := a.e.HandOver(context.Background(), "b"); err != nil {
			t.Fatalf("HandOver: %v", err)
		}
		cl.waitLeader(a, time.Second)
		tookWithin(t, b, handed, promptly)
		b.e.SetCampaigning(true)
		b.e.SetCampaigning(false)
		time.Sleep(2 * DefaultLeaseDuration)
		if !b.e.IsLeader() {
			t.Fatal("b stopped leading while following only; a term under way must go on")
		}
		// b resigns: the lease is released to nobody; b, following only, does not
		// take it back, and a (campaigning) does.
		updates := b.store.count("Update")
		if !b.e.Resign(b.e.Term()) {
			t.Fatal("Resign returned false")
		}
		cl.waitLeader(b, 2*DefaultLeaseDuration)
		time.Sleep(2 * DefaultLeaseDuration)
		if n := b.store.count("Update") - updates; n != 1 {
			t.Errorf("b sent %d Updates after its Resign, want 1 (the release)", n)
		}
		if l := cl.leader(); l != a {
			t.Errorf("leader %v, want a", l)
		}
	})
}

func TestFollowOnlyRefusedWithSingleReplica(t *testing.T) {
	_, err := NewWithStore(Config{SingleReplica: true, Identity: "solo", FollowOnly: true}, nil, Callbacks{}, nil)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "followOnly") {
		t.Fatalf("NewWithStore(SingleReplica, FollowOnly) = %v, want ErrInvalidConfig naming followOnly", err)
	}
}

// TestFollowOnlyDeathTakeoverAfterExpiry: Stats.DeathTakeovers counts only the
// takeovers the death signal made early. An elector following only sees the holder
// proven dead, but is allowed to campaign only after the lease expired anyway: it
// takes the lease at once, and the takeover is not counted.
func TestFollowOnlyDeathTakeoverAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
		time.Sleep(time.Second)
		binc := incarnationOf("b", r)
		k.started(binc, incarnation.Incarnation{}, false)
		b := cl.start("b", func(c *Config) { c.Incarnation, c.DeathWatch, c.FollowOnly = binc.String(), k, true })
		time.Sleep(3 * time.Second) // b sees a's renews in watch events
		if cl.leader() != a.cand {
			t.Fatal("a does not lead")
		}
		a.kill(k)
		k.report(a.inc, true)
		time.Sleep(DefaultLeaseDuration + time.Second)
		requireNoWrites(t, b, "holder proven dead")
		allowed := time.Now()
		b.e.SetCampaigning(true)
		cl.waitLeader(a.cand, time.Second)
		tookWithin(t, b, allowed, promptly)
		if got := b.e.Stats().DeathTakeovers; got != 0 {
			t.Errorf("Stats.DeathTakeovers = %d after a takeover once the lease had expired, want 0", got)
		}
	})
}
