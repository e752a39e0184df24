package leaderelection

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// TestContention starts three candidates at the same instant, then makes the leader
// change again and again (release, crash, failing store), and checks that exactly one
// leads at a time with strictly increasing terms.
func TestContention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		release := func(c *Config) { c.ReleaseOnCancel = true }
		for _, id := range []string{"a", "b", "c"} {
			cl.start(id, release)
		}
		leader := cl.waitLeader(nil, time.Second)
		time.Sleep(time.Minute)
		if l := cl.leader(); l != leader {
			t.Fatalf("leader changed from %s to %v while renewing", leader.id, l)
		}
		next := 0
		for round := range 9 {
			switch round % 3 {
			case 0: // graceful: stop the leader with release, start a replacement
				if err := leader.shutdown(); err != nil {
					t.Fatalf("shutdown %s: %v", leader.id, err)
				}
				next++
				cl.start(leader.id+"'"+string(rune('0'+next)), release)
			case 1: // partitioned leader, healed after the takeover
				leader.store.setMode(modeHang)
			case 2: // failing store for the leader, healed after the takeover
				leader.store.setMode(modeFail)
			}
			t.Logf("round %d: %s leads", round, leader.id)
			nl := cl.waitLeader(leader, 30*time.Second)
			leader.store.setMode(modePass)
			leader = nl
			time.Sleep(10 * time.Second)
		}
	})
}

// TestGracefulRelease: a leader stopped with ReleaseOnCancel hands over to a follower
// on the watch event, within a few milliseconds (1ms store latency).
func TestGracefulRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", func(c *Config) { c.ReleaseOnCancel = true })
		time.Sleep(time.Second)
		if !a.e.IsLeader() || a.e.GetLeader() != "a" {
			t.Fatalf("a: IsLeader %v, GetLeader %q", a.e.IsLeader(), a.e.GetLeader())
		}
		b := cl.start("b", nil)
		c := cl.start("c", nil)
		time.Sleep(5 * time.Second)
		if got := b.e.GetLeader(); got != "a" {
			t.Fatalf("b: GetLeader = %q, want a", got)
		}
		if err := a.shutdown(); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		_, _, released := a.store.times()
		if released.IsZero() {
			t.Fatal("a did not release the lease")
		}
		nl := cl.waitLeader(a, time.Second)
		_, started, _, _ := nl.snapshot()
		took := started[0].Sub(released)
		t.Logf("released lease taken by %s after %v", nl.id, took)
		if took < 0 || took >= 100*time.Millisecond {
			t.Fatalf("takeover after %v, want < 100ms", took)
		}
		time.Sleep(time.Second)
		for _, f := range []*candidate{b, c} {
			f.mu.Lock()
			got := slices.Clone(f.newLeaders)
			f.mu.Unlock()
			if want := []string{"a", nl.id}; !slices.Equal(got, want) {
				t.Errorf("%s: OnNewLeader got %q, want %q", f.id, got, want)
			}
		}
	})
}

// TestReleaseOnFirstLook: a graceful release is taken at once only by a follower that
// saw the lease held before (TestGracefulRelease). A candidate whose first look at the
// lease is the release waits it out as an unknown holder, a LeaseDuration from that
// look, since it may be a restored copy: so a leader stopped before the others looked
// is replaced only then (the 15s handovers of the guide's test, which now waits for
// every replica to observe the leader before stopping it).
func TestReleaseOnFirstLook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", func(c *Config) { c.ReleaseOnCancel = true })
		time.Sleep(time.Second)
		if !a.e.IsLeader() {
			t.Fatal("a does not lead")
		}
		if err := a.shutdown(); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		_, _, released := a.store.times()
		if released.IsZero() {
			t.Fatal("a did not release the lease")
		}
		cl.start("b", nil)
		nl := cl.waitLeader(a, 2*DefaultLeaseDuration)
		_, started, _, _ := nl.snapshot()
		took := started[0].Sub(released)
		t.Logf("release seen on a first look taken by %s after %v", nl.id, took)
		if took < DefaultLeaseDuration || took >= DefaultLeaseDuration+time.Second {
			t.Fatalf("takeover %v after the release, want a LeaseDuration (%v) from the first look", took, DefaultLeaseDuration)
		}
	})
}

// TestCrashedLeader: a leader that stops answering (black-holed store, or cancelled
// without release) is replaced right when its lease expires by the follower's clock:
// no sooner than LeaseDuration and within LeaseDuration+500ms after its last renew.
func TestCrashedLeader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash func(*candidate)
	}{
		{"black-holed", func(c *candidate) { c.store.setMode(modeHang) }},
		{"cancelled without release", func(c *candidate) { c.cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl := newCluster(t)
				defer cl.stop()
				a := cl.start("a", nil)
				time.Sleep(time.Second)
				cl.start("b", nil)
				cl.start("c", nil)
				time.Sleep(7*time.Second + 300*time.Millisecond) // mid-way between renews
				tc.crash(a)
				nl := cl.waitLeader(a, 30*time.Second)
				a.store.setMode(modePass)
				_, lastRenew, _ := a.store.times()
				_, started, _, _ := nl.snapshot()
				after := started[0].Sub(lastRenew)
				t.Logf("crashed leader replaced %v after its last renew", after)
				if after < DefaultLeaseDuration || after > DefaultLeaseDuration+500*time.Millisecond {
					t.Fatalf("takeover %v after last renew, want in [%v, %v]", after,
						DefaultLeaseDuration, DefaultLeaseDuration+500*time.Millisecond)
				}
				if ctx := a.lastCtx(); ctx.Err() == nil {
					t.Fatal("crashed leader's term context still open")
				}
			})
		})
	}
}

// TestFollowerSendsNoRequests: over ten minutes of renewals, a follower sends nothing
// but its one watch, and the leader renews every RetryPeriod with no reads.
func TestFollowerSendsNoRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		time.Sleep(10 * time.Minute)
		if got, want := b.store.counts(), map[string]int{"Watch": 1}; !mapsEqual(got, want) {
			t.Errorf("follower calls = %v, want %v", got, want)
		}
		got := a.store.counts()
		renews := got["Update"]
		if got["Get"] != 0 || got["Watch"] != 1 || got["Create"] != 1 {
			t.Errorf("leader calls = %v, want 1 Create, 1 Watch, no Get", got)
		}
		// 10m1s of leading at one renew per RetryPeriod (plus 1ms latency each).
		if renews < 295 || renews > 301 {
			t.Errorf("leader renewed %d times in 10m, want about 300", renews)
		}
		if l := cl.leader(); l != a {
			t.Errorf("leader = %v, want a", l)
		}
	})
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRenewFailure: a leader whose store fails steps down exactly RenewDeadline after
// the send time of its last successful renew (term context ended, cause
// ErrRenewDeadlineMissed, OnStoppedLeading once), follows again, and leads again with a
// higher term once the new leader fails in turn.
func TestRenewFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		time.Sleep(4*time.Second + 500*time.Millisecond)
		a.store.setMode(modeFail)
		renewSent, _, _ := a.store.times()
		ctx := a.lastCtx()
		firstTerms, _, _, _ := a.snapshot()

		time.Sleep(time.Until(renewSent.Add(DefaultRenewDeadline - time.Millisecond)))
		if !a.e.IsLeader() || ctx.Err() != nil || a.e.Healthy() != nil {
			t.Fatalf("1ms before the deadline: IsLeader %v, ctx.Err %v, Healthy %v", a.e.IsLeader(), ctx.Err(), a.e.Healthy())
		}
		time.Sleep(time.Millisecond)
		if a.e.IsLeader() || a.e.Term() != 0 {
			t.Fatalf("at the deadline: IsLeader %v, Term %d", a.e.IsLeader(), a.e.Term())
		}
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), ErrRenewDeadlineMissed) {
			t.Fatalf("at the deadline: ctx.Err %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		synctest.Wait()
		if _, _, _, stopped := a.snapshot(); stopped != 1 {
			t.Fatalf("OnStoppedLeading ran %d times, want 1", stopped)
		}
		if l := cl.leader(); l != nil {
			t.Fatalf("%s leads before a's lease expired", l.id)
		}

		nl := cl.waitLeader(a, 10*time.Second)
		if nl != b {
			t.Fatalf("new leader %s, want b", nl.id)
		}
		a.store.setMode(modePass)
		time.Sleep(time.Minute)
		if cl.leader() != b {
			t.Fatal("healed a took the lease from a renewing b")
		}
		b.store.setMode(modeFail)
		if nl := cl.waitLeader(b, 30*time.Second); nl != a {
			t.Fatalf("new leader %s, want a", nl.id)
		}
		b.store.setMode(modePass)
		terms, _, _, stopped := a.snapshot()
		bTerms, _, _, _ := b.snapshot()
		if len(terms) != 2 || stopped != 1 || terms[1] <= bTerms[0] || bTerms[0] <= firstTerms[0] {
			t.Fatalf("a terms %v (stopped %d), b terms %v: want a < b < a'", terms, stopped, bTerms)
		}
	})
}

// TestLeaseDeletedByHand: the leader steps down on the delete event and, knowing its
// own term is over, re-creates the lease at once with a higher term.
func TestLeaseDeletedByHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		cl.start("b", nil)
		cl.start("c", nil)
		time.Sleep(3 * time.Second)
		ctx := a.lastCtx()
		before := a.e.Term()
		deleted := time.Now()
		cl.mem.remove()
		synctest.Wait()
		if !errors.Is(context.Cause(ctx), ErrLeaseLost) {
			t.Fatalf("term context cause after delete = %v, want ErrLeaseLost", context.Cause(ctx))
		}
		l := cl.waitLeader(nil, 10*time.Second)
		terms, started, _, _ := l.snapshot()
		t.Logf("deleted lease re-created by %s after %v", l.id, started[len(started)-1].Sub(deleted))
		if l != a || started[len(started)-1].Sub(deleted) > 100*time.Millisecond {
			t.Fatalf("new leader %s after %v, want a at once", l.id, started[len(started)-1].Sub(deleted))
		}
		if got := terms[len(terms)-1]; got <= before {
			t.Fatalf("term after re-create %d, want above %d", got, before)
		}
		rec, err := cl.mem.Get(context.Background())
		if err != nil || rec.LeaseTransitions != 0 || rec.HolderIdentity != "a" {
			t.Fatalf("re-created lease %+v, %v: want holder a, 0 transitions", rec, err)
		}
	})
}

// TestLeaseOverwrittenByHand: a hand-written holder ends the leader's term at once;
// nobody, not even the candidate named as holder, takes the lease before it expires,
// which for a holder not written by Baton is three times its lease duration (it could be
// client-go's elector, whose leader outlives its lease duration).
func TestLeaseOverwrittenByHand(t *testing.T) {
	for _, holder := range []string{"intruder", "b"} {
		t.Run(holder, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl := newCluster(t)
				defer cl.stop()
				a := cl.start("a", nil)
				time.Sleep(time.Second)
				cl.start("b", nil)
				cl.start("c", nil)
				time.Sleep(3 * time.Second)
				ctx := a.lastCtx()
				before := a.e.Term()
				now := time.Now()
				set := cl.mem.set(LeaseRecord{HolderIdentity: holder, LeaseDuration: DefaultLeaseDuration,
					AcquireTime: now, RenewTime: now, LeaseTransitions: 7})
				synctest.Wait()
				if a.e.IsLeader() || !errors.Is(context.Cause(ctx), ErrLeaseLost) {
					t.Fatalf("after overwrite: IsLeader %v, cause %v", a.e.IsLeader(), context.Cause(ctx))
				}
				if got := a.e.GetLeader(); got != holder {
					t.Fatalf("GetLeader = %q, want %q", got, holder)
				}
				time.Sleep(foreignLeaseFactor*DefaultLeaseDuration - time.Millisecond)
				if l := cl.leader(); l != nil {
					t.Fatalf("%s took the overwritten lease before it expired", l.id)
				}
				l := cl.waitLeader(nil, time.Second)
				terms, _, _, _ := l.snapshot()
				if got := terms[len(terms)-1]; got <= before {
					t.Fatalf("term %d after overwrite, want above %d", got, before)
				}
				rec, _ := cl.mem.Get(context.Background())
				want := set.LeaseTransitions + 1 // holder changed
				if rec.HolderIdentity == holder {
					want = set.LeaseTransitions
				}
				if rec.HolderIdentity != l.id || rec.LeaseTransitions != want {
					t.Fatalf("lease after takeover %+v: want holder %s, transitions %d", rec, l.id, want)
				}
			})
		})
	}
}

// TestStuckLeader: a leader whose store call hangs, ignoring its context (a stuck
// process), stops believing it leads at the renew deadline, and Healthy reports it.
func TestStuckLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		ctx := a.lastCtx()
		a.store.setMode(modeStuck)
		renewSent, _, _ := a.store.times()
		time.Sleep(time.Until(renewSent.Add(DefaultRenewDeadline)))
		if a.e.IsLeader() || ctx.Err() == nil {
			t.Fatalf("past the deadline: IsLeader %v, ctx.Err %v", a.e.IsLeader(), ctx.Err())
		}
		if err := a.e.Healthy(); !errors.Is(err, ErrRenewDeadlineMissed) {
			t.Fatalf("Healthy = %v, want ErrRenewDeadlineMissed", err)
		}
		a.store.setMode(modePass)
		synctest.Wait()
		if err := a.e.Healthy(); err != nil {
			t.Fatalf("Healthy after the call returned = %v", err)
		}
		// It takes its own lease back, a LeaseDuration after it sees it again: its watch
		// was down for long, and its last write is older than a RenewDeadline, so the
		// record could be a restored copy that another candidate took over since.
		time.Sleep(DefaultLeaseDuration - 100*time.Millisecond)
		if l := cl.leader(); l != nil {
			t.Fatalf("%s leads before a LeaseDuration after the store healed", l.id)
		}
		if l := cl.waitLeader(nil, time.Second); l != a {
			t.Fatalf("leader %s, want a", l.id)
		}
	})
}

// TestWatchBackoff: a follower whose watch keeps failing retries with a doubling,
// jittered delay capped at RetryPeriod(1+jitter); once it watches again it sees the
// renews and does not take the lease.
func TestWatchBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		cl.start("a", nil)
		time.Sleep(time.Second)
		store := newTestStore(cl.mem, 0)
		store.setMode(modeFail)
		var stopped atomic.Int32
		e, err := NewWithStore(testConfig("b"), store, Callbacks{OnStoppedLeading: func() { stopped.Add(1) }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.rand = func() float64 { return 0.5 } // jitter: +25% (factor 0.5)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = e.Start(ctx) })
		time.Sleep(10 * time.Second)
		store.setMode(modePass)
		time.Sleep(time.Minute)
		if e.IsLeader() || e.GetLeader() != "a" {
			t.Errorf("b: IsLeader %v, GetLeader %q; want follower of a", e.IsLeader(), e.GetLeader())
		}
		cancel()
		wg.Wait()

		store.mu.Lock()
		times := slices.Clone(store.watchTimes)
		store.mu.Unlock()
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, times[i].Sub(times[i-1]))
		}
		// initial RetryPeriod/16 = 125ms, doubling to 2s, each +25%.
		want := []time.Duration{156250 * time.Microsecond, 312500 * time.Microsecond, 625 * time.Millisecond,
			1250 * time.Millisecond, 2500 * time.Millisecond, 2500 * time.Millisecond}
		if len(gaps) < len(want) {
			t.Fatalf("watch attempts at gaps %v, want at least %v", gaps, want)
		}
		if !slices.Equal(gaps[:len(want)], want) {
			t.Fatalf("watch retry gaps %v, want %v...", gaps, want)
		}
		for _, g := range gaps[len(want):] {
			if g != 2500*time.Millisecond && g < 2*time.Second {
				t.Fatalf("watch retry gaps %v: want capped at 2.5s", gaps)
			}
		}
		if n := store.count("Get") + store.count("Update") + store.count("Create"); n != 0 {
			t.Errorf("follower sent %d reads/writes", n)
		}
	})
}

// TestWatchBreakRelists: a watch the store closes is opened again; the follower keeps
// following.
func TestWatchBreakRelists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		for range 5 {
			time.Sleep(20 * time.Second)
			b.store.breakWatches()
			a.store.breakWatches()
		}
		time.Sleep(time.Minute)
		if got := b.store.count("Watch"); got != 6 {
			t.Errorf("follower watched %d times, want 6", got)
		}
		if got := b.store.count("Get") + b.store.count("Update"); got != 0 {
			t.Errorf("follower sent %d reads/writes", got)
		}
		if cl.leader() != a {
			t.Error("leadership changed")
		}
	})
}

// TestMetadataOnlyChange: a write that changes only the lease's version (metadata) does
// not end the term; the leader adopts the version.
func TestMetadataOnlyChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second + 500*time.Millisecond)
		term := a.e.Term()
		rec, _ := cl.mem.Get(context.Background())
		cl.mem.set(rec) // same fields, new resourceVersion
		time.Sleep(time.Minute)
		if a.e.Term() != term {
			t.Fatalf("term %d after a metadata change, want %d", a.e.Term(), term)
		}
		if got := a.store.count("Get"); got != 0 {
			t.Errorf("leader read the lease %d times; the watch told it", got)
		}
	})
}

// TestConflictOnRenew: when a metadata-only write reaches the store before the
// leader's watch does, the renew conflicts; the leader reads, adopts and renews.
func TestConflictOnRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second + 500*time.Millisecond)
		term := a.e.Term()
		a.store.mu.Lock()
		a.store.beforeUpdate = func() {
			rec, _ := cl.mem.Get(context.Background())
			cl.mem.set(rec) // same fields, new resourceVersion, just before the renew
		}
		a.store.mu.Unlock()
		time.Sleep(time.Minute)
		if a.e.Term() != term {
			t.Fatalf("term %d, want %d", a.e.Term(), term)
		}
		if a.store.count("Get") == 0 {
			t.Error("leader never read the lease after a conflict")
		}
	})
}

// TestDisabled: without election the elector leads alone with term 1.
func TestDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stopped, newLeader atomic.Int32
		started := make(chan uint64, 1)
		e, err := NewWithStore(Config{SingleReplica: true, Identity: "solo"}, nil, Callbacks{
			OnStartedLeading: func(ctx context.Context) {
				term, _ := termctx.FromContext(ctx)
				started <- term
				<-ctx.Done()
			},
			OnStoppedLeading: func() { stopped.Add(1) },
			OnNewLeader: func(id string) {
				if id == "solo" {
					newLeader.Add(1)
				}
			},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Start(ctx) }()
		if term := <-started; term != 1 {
			t.Fatalf("term %d, want 1", term)
		}
		time.Sleep(time.Hour)
		if !e.IsLeader() || e.Term() != 1 || e.GetLeader() != "solo" || e.Healthy() != nil {
			t.Fatalf("IsLeader %v Term %d GetLeader %q Healthy %v", e.IsLeader(), e.Term(), e.GetLeader(), e.Healthy())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Start = %v", err)
		}
		if e.IsLeader() || stopped.Load() != 1 || newLeader.Load() != 1 {
			t.Fatalf("after stop: IsLeader %v, stopped %d, new leader %d", e.IsLeader(), stopped.Load(), newLeader.Load())
		}
		if err := e.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
			t.Fatalf("second Start = %v, want ErrAlreadyStarted", err)
		}
	})
}

// TestStartWaitsForLeaderWork: Start returns only after OnStartedLeading returned, and
// releases the lease only then.
func TestStartWaitsForLeaderWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := NewMemoryStore("lease")
		var workDone atomic.Bool
		cfg := testConfig("a")
		cfg.ReleaseOnCancel = true
		e, err := NewWithStore(cfg, store, Callbacks{OnStartedLeading: func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(3 * time.Second) // slow cleanup
			if r, _ := store.Get(context.Background()); r.HolderIdentity != "a" {
				t.Errorf("lease released while leader work still ran: %+v", r)
			}
			workDone.Store(true)
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Start(ctx) }()
		time.Sleep(time.Second)
		cancel()
		if err := <-done; err != nil || !workDone.Load() {
			t.Fatalf("Start = %v, work done %v", err, workDone.Load())
		}
		if r, _ := store.Get(context.Background()); r.HolderIdentity != "" || r.LeaseDuration != time.Second {
			t.Fatalf("lease after release %+v, want no holder and 1s", r)
		}
	})
}

// TestHungWatchOpen: a follower whose store black-holes everything, the watch's List
// included, gives up on the watch after RenewDeadline, and follows again once healed.
func TestHungWatchOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		b.store.setMode(modeHang)
		time.Sleep(time.Minute)
		if got := b.store.count("Watch"); got < 5 {
			t.Fatalf("b tried to watch %d times in a minute, want it to keep retrying", got)
		}
		if cl.leader() != a {
			t.Fatal("leadership changed")
		}
		b.store.setMode(modePass)
		time.Sleep(DefaultRenewDeadline + 3*time.Second)
		if b.e.GetLeader() != "a" {
			t.Fatalf("healed b sees leader %q, want a", b.e.GetLeader())
		}
		a.store.setMode(modeHang)
		if nl := cl.waitLeader(a, 20*time.Second); nl != b {
			t.Fatalf("new leader %s, want b", nl.id)
		}
		a.store.setMode(modePass)
	})
}

// TestSilentWatch: a follower whose watch stalls (delivers the state, then nothing)
// tries the lease when it seems expired, gets a conflict because the leader renewed,
// opens a new watch, and never leads while the leader renews; it takes over once the
// leader stops.
func TestSilentWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		c := cl.startWith("b", nil, func(s *testStore) { s.silent = true })
		time.Sleep(2 * time.Minute)
		if cl.leader() != a {
			t.Fatal("leadership changed while a renewed")
		}
		counts := c.store.counts()
		t.Logf("silent follower calls in 2m: %v", counts)
		// Every LeaseDuration+RetryPeriod: one failed CAS, one new watch.
		if counts["Update"] < 5 || counts["Update"] > 8 || counts["Watch"] < counts["Update"] || counts["Get"] != 0 {
			t.Fatalf("silent follower calls %v in 2m, want ~7 conflicting updates, as many watches, no gets", counts)
		}
		a.store.setMode(modeHang)
		if nl := cl.waitLeader(a, 40*time.Second); nl != c {
			t.Fatalf("new leader %s, want b", nl.id)
		}
		a.store.setMode(modePass)
	})
}

// slowCancelStore is a MemoryStore whose first Watch hangs until its context ends and
// then takes another hour to return, like a List stuck in a dead connection.
type slowCancelStore struct {
	*MemoryStore
	calls    atomic.Int32
	returned atomic.Bool // the first Watch returned
}

func (s *slowCancelStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	if s.calls.Add(1) > 1 {
		return s.MemoryStore.Watch(ctx)
	}
	<-ctx.Done()
	time.Sleep(time.Hour)
	s.returned.Store(true)
	return nil, ctx.Err()
}

// TestStartWaitsForAbandonedWatch: a watch open abandoned after RenewDeadline still has
// its goroutine waited for by Start, so nothing of the elector outlives Start.
func TestStartWaitsForAbandonedWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &slowCancelStore{MemoryStore: NewMemoryStore("lease")}
		e, err := NewWithStore(testConfig("a"), store, Callbacks{}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.Start(ctx) }()
		time.Sleep(DefaultRenewDeadline + 2*DefaultRetryPeriod)
		if store.calls.Load() < 2 {
			t.Fatalf("%d watch calls, want the hung one abandoned and another opened", store.calls.Load())
		}
		if !e.IsLeader() {
			t.Fatal("not leading through the second watch")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if !store.returned.Load() {
			t.Fatal("Start returned while the abandoned watch open was still running")
		}
	})
}

// TestLostRenewReply: the reply to a renew that went through is lost and the
// leader's watch is silent; the retry conflicts with the leader's own write. The leader
// must recognise its write and keep its term.
func TestLostRenewReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.startWith("a", nil, func(s *testStore) { s.silent = true })
		// a's silent watch never shows its Create: it holds the lease a LeaseDuration
		// before it leads.
		time.Sleep(DefaultLeaseDuration + time.Second)
		cl.start("b", nil)
		time.Sleep(time.Second)
		term := a.e.Term()
		a.store.mu.Lock()
		a.store.loseReplies = 1
		a.store.mu.Unlock()
		time.Sleep(time.Minute)
		if !a.e.IsLeader() || a.e.Term() != term {
			terms, _, _, _ := a.snapshot()
			t.Fatalf("a: IsLeader %v, term %d (terms %v), want term %d kept", a.e.IsLeader(), a.e.Term(), terms, term)
		}
	})
}
