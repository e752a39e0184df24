package leaderelection

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// fakeClock is a clock that moves only when told, for the lazy check of termContext.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// AfterFunc never calls f: only the lazy check ends a term on a fakeClock.
func (c *fakeClock) AfterFunc(time.Duration, func()) Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return false }

// TestTermContextLazyExpiry: with the clock past the renew deadline and no timer or
// other goroutine having run, Err and Done already report the term over (as in a
// process resumed after SIGSTOP).
func TestTermContextLazyExpiry(t *testing.T) {
	for _, first := range []string{"Err", "Done"} {
		t.Run(first, func(t *testing.T) {
			start := time.Now()
			clock := &fakeClock{now: start}
			tc := newTermContext(context.Background(), termctx.Term{Number: 42}, start, 10*time.Second, clock)
			defer tc.end(context.Canceled)
			if tc.Err() != nil {
				t.Fatal("fresh term ended")
			}
			clock.now = start.Add(10*time.Second - time.Nanosecond)
			if tc.Err() != nil || isClosed(tc.Done()) {
				t.Fatal("term ended before its deadline")
			}
			if !tc.markRenewed(start.Add(5 * time.Second)) {
				t.Fatal("renew before the deadline refused")
			}
			clock.now = start.Add(15*time.Second - time.Nanosecond)
			if tc.Err() != nil {
				t.Fatal("term ended before the deadline of its renew")
			}
			clock.now = start.Add(15 * time.Second) // the runtime clock did not move
			switch first {
			case "Err":
				if tc.Err() == nil {
					t.Fatal("Err nil past the renew deadline")
				}
				if !isClosed(tc.Done()) {
					t.Fatal("Done open after Err reported the end")
				}
			case "Done":
				if !isClosed(tc.Done()) {
					t.Fatal("Done open past the renew deadline")
				}
			}
			if !errors.Is(tc.Err(), context.Canceled) || !errors.Is(context.Cause(tc), ErrRenewDeadlineMissed) {
				t.Fatalf("Err %v, Cause %v", tc.Err(), context.Cause(tc))
			}
			if tc.markRenewed(start.Add(14 * time.Second)) {
				t.Fatal("a late renew revived an ended term")
			}
			if tc.Err() == nil {
				t.Fatal("term revived")
			}
		})
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestTermContextTimer: the timer ends the term at the deadline, moved by renews, and
// derived contexts end with it; the term is readable from them.
func TestTermContextTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tc := newTermContext(context.Background(), termctx.Term{Number: 7}, start, 10*time.Second, realClock{})
		child, cancel := context.WithCancel(tc)
		defer cancel()
		if term, ok := termctx.FromContext(child); !ok || term != 7 {
			t.Fatalf("termctx.FromContext = %d, %v", term, ok)
		}
		if _, ok := termctx.FromContext(context.Background()); ok {
			t.Fatal("termctx.FromContext found a term in Background")
		}
		time.Sleep(4 * time.Second)
		tc.markRenewed(time.Now())
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if child.Err() != nil {
			t.Fatal("derived context ended before the renewed deadline")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if child.Err() == nil || !errors.Is(context.Cause(child), ErrRenewDeadlineMissed) {
			t.Fatalf("derived context at the deadline: Err %v, Cause %v", child.Err(), context.Cause(child))
		}
		if got := time.Since(start); got != 14*time.Second {
			t.Fatalf("ended after %v, want 14s", got)
		}
	})
}

// TestTermContextParent: the term ends with its parent, with the parent's cause, and
// end stops the timer.
func TestTermContextParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := errors.New("shutdown")
		parent, cancel := context.WithCancelCause(context.Background())
		tc := newTermContext(parent, termctx.Term{Number: 1}, time.Now(), time.Second, realClock{})
		cancel(cause)
		if !errors.Is(context.Cause(tc), cause) || tc.Err() == nil {
			t.Fatalf("Cause %v, Err %v", context.Cause(tc), tc.Err())
		}
		tc.end(ErrLeaseLost)
		if !errors.Is(context.Cause(tc), cause) {
			t.Fatalf("end replaced the cause: %v", context.Cause(tc))
		}
		disabled := newTermContext(context.Background(), termctx.Term{Number: 1}, time.Now(), 0, realClock{})
		time.Sleep(24 * time.Hour)
		if disabled.Err() != nil {
			t.Fatal("a term without renew deadline ended by the clock")
		}
		disabled.end(ErrLeaseLost)
		if !errors.Is(context.Cause(disabled), ErrLeaseLost) {
			t.Fatalf("Cause %v", context.Cause(disabled))
		}
	})
}

// BenchmarkTermContext compares the checks leader work makes on its term context with
// the same checks on a plain cancellable context (the baseline).
func BenchmarkTermContext(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline/Err", func(b *testing.B) {
		plain, cancel := context.WithCancel(ctx)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			if plain.Err() != nil {
				b.Fatal("ended")
			}
		}
	})
	b.Run("term/Err", func(b *testing.B) {
		tc := newTermContext(ctx, termctx.Term{Number: 1}, time.Now(), time.Hour, realClock{})
		defer tc.end(context.Canceled)
		b.ReportAllocs()
		for b.Loop() {
			if tc.Err() != nil {
				b.Fatal("ended")
			}
		}
	})
	b.Run("baseline/Done", func(b *testing.B) {
		plain, cancel := context.WithCancel(ctx)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			select {
			case <-plain.Done():
				b.Fatal("ended")
			default:
			}
		}
	})
	b.Run("term/Done", func(b *testing.B) {
		tc := newTermContext(ctx, termctx.Term{Number: 1}, time.Now(), time.Hour, realClock{})
		defer tc.end(context.Canceled)
		b.ReportAllocs()
		for b.Loop() {
			select {
			case <-tc.Done():
				b.Fatal("ended")
			default:
			}
		}
	})
	b.Run("term/IsLeader", func(b *testing.B) {
		e := &Elector{}
		tc := newTermContext(ctx, termctx.Term{Number: 1}, time.Now(), time.Hour, realClock{})
		defer tc.end(context.Canceled)
		e.current.Store(tc)
		b.ReportAllocs()
		for b.Loop() {
			if !e.IsLeader() {
				b.Fatal("not leader")
			}
		}
	})
}

// TestTermEndsAtItsDeadlineAfterAnEarlierTermsLateEnd: the end of an earlier term that
// comes after the next term started (a Resign racing the step-down) leaves the next
// term's timer armed, so the next term still ends at its deadline without any goroutine
// looking at it.
func TestTermEndsAtItsDeadlineAfterAnEarlierTermsLateEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newTermContext(context.Background(), termctx.Term{Number: 1}, time.Now(), 10*time.Second, realClock{})
		first.cancel(ErrLeaseLost) // ended; its end (the timer's stop) comes late
		second := newTermContext(context.Background(), termctx.Term{Number: 2}, time.Now(), 10*time.Second, realClock{})
		first.end(ErrResigned)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// The wrapped context: no check of the clock, only the timer ends it.
		if second.Context.Err() == nil || !errors.Is(context.Cause(second), ErrRenewDeadlineMissed) {
			t.Fatalf("next term at its deadline: Err %v, Cause %v", second.Context.Err(), context.Cause(second))
		}
		second.end(ErrLeaseLost)
	})
}

// TestCallTimeoutOnTheClock: a store call's context ends once its timeout has passed on
// the elector's Clock (half the true time on a clock at twice the rate), with the
// cause given, and at once when cancelled.
func TestCallTimeoutOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := withTimeout(context.Background(), rateClock{start: time.Now(), rate: 2}, 10*time.Second, ErrRenewDeadlineMissed)
		defer cancel()
		derived, stop := context.WithCancel(ctx)
		defer stop()
		time.Sleep(5*time.Second - time.Nanosecond)
		synctest.Wait()
		if derived.Err() != nil {
			t.Fatal("call context ended before its timeout on the clock")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if derived.Err() == nil || context.Cause(derived) != ErrRenewDeadlineMissed {
			t.Fatalf("at the timeout: Err %v, Cause %v", derived.Err(), context.Cause(derived))
		}
		other, cancelOther := withTimeout(context.Background(), realClock{}, time.Hour, context.DeadlineExceeded)
		cancelOther()
		if other.Err() != context.Canceled {
			t.Fatalf("cancelled call context: Err %v", other.Err())
		}
	})
}

// TestDerivedContextSeesLazyExpiry: a context derived from the term context
// reports the end of the term as soon as anything on its chain is asked, even before the
// timer ran (a process resumed after SIGSTOP).
func TestDerivedContextSeesLazyExpiry(t *testing.T) {
	start := time.Now()
	clock := &fakeClock{now: start}
	tc := newTermContext(context.Background(), termctx.Term{Number: 7}, start, 10*time.Second, clock)
	defer tc.end(context.Canceled)
	child, cancel := context.WithCancel(tc)
	defer cancel()
	grandchild, cancel2 := context.WithTimeout(child, time.Hour)
	defer cancel2()
	clock.now = start.Add(10 * time.Second)
	if term, ok := termctx.FromContext(grandchild); !ok || term != 7 {
		t.Fatalf("termctx.FromContext = %d, %v", term, ok)
	}
	if grandchild.Err() == nil || child.Err() == nil {
		t.Fatalf("derived contexts live past the renew deadline: child %v, grandchild %v", child.Err(), grandchild.Err())
	}
}
