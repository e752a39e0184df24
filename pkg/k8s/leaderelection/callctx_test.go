package leaderelection

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestCallContextLazy: a call context nobody waits on ends by its clock check alone:
// Err is DeadlineExceeded from the deadline on (and stays so after stop), Canceled
// after an earlier stop, the parent's error (and cause) when the parent ends first; it
// reports the deadline on the real clock, and costs one allocation.
func TestCallContextLazy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCallContext(context.Background(), realClock{}, 10*time.Second)
		if d, ok := c.Deadline(); !ok || !d.Equal(time.Now().Add(10*time.Second)) {
			t.Errorf("Deadline = %v, %v; want now+10s", d, ok)
		}
		time.Sleep(10*time.Second - time.Nanosecond)
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline: %v", err)
		}
		time.Sleep(time.Nanosecond)
		if err := c.Err(); err != context.DeadlineExceeded || context.Cause(c) != context.DeadlineExceeded {
			t.Fatalf("at the deadline: Err %v, Cause %v; want DeadlineExceeded", err, context.Cause(c))
		}
		c.stop()
		if err := c.Err(); err != context.DeadlineExceeded {
			t.Fatalf("stop changed Err to %v", err)
		}

		stopped := newCallContext(context.Background(), realClock{}, time.Second)
		stopped.stop()
		time.Sleep(time.Second)
		if err := stopped.Err(); err != context.Canceled || !isClosed(stopped.Done()) {
			t.Fatalf("after stop: Err %v, Done closed %v; want Canceled, true", err, isClosed(stopped.Done()))
		}

		cause := errors.New("shutdown")
		parent, cancel := context.WithCancelCause(context.Background())
		child := newCallContext(parent, realClock{}, time.Second)
		defer child.stop()
		cancel(cause)
		if child.Err() != context.Canceled || context.Cause(child) != cause {
			t.Fatalf("parent ended: Err %v, Cause %v", child.Err(), context.Cause(child))
		}
		if n := testing.AllocsPerRun(100, func() {
			c := newCallContext(parent, realClock{}, time.Second)
			_ = c.Err()
			c.stop()
		}); n != 1 {
			t.Errorf("a call context nobody waits on costs %.0f allocations, want 1", n)
		}
	})
}

// TestCallContextDone: once someone waits on it, a call context ends at its deadline
// without any Err call, as context.WithTimeout's would on the real clock (derived
// contexts end with DeadlineExceeded), and by a timer on another Clock (at d of that
// clock, cause DeadlineExceeded); stop ends derived contexts at once.
func TestCallContextDone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clock func() Clock
		after time.Duration // true time to the deadline of 10s on the clock
	}{
		{"real clock", func() Clock { return realClock{} }, 10 * time.Second},
		{"clock at twice the rate", func() Clock { return rateClock{start: time.Now(), rate: 2} }, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCallContext(context.Background(), tc.clock(), 10*time.Second)
				defer c.stop()
				derived, cancel := context.WithCancel(c)
				defer cancel()
				time.Sleep(tc.after - time.Nanosecond)
				synctest.Wait()
				if derived.Err() != nil {
					t.Fatal("derived context ended before the deadline")
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if !isClosed(c.Done()) || !isClosed(derived.Done()) {
					t.Fatal("call context or derived context open at the deadline")
				}
				if c.Err() != context.DeadlineExceeded || context.Cause(derived) != context.DeadlineExceeded {
					t.Fatalf("Err %v, derived cause %v; want DeadlineExceeded", c.Err(), context.Cause(derived))
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		c := newCallContext(context.Background(), realClock{}, time.Hour)
		derived, cancel := context.WithCancel(c)
		defer cancel()
		c.stop()
		synctest.Wait()
		if derived.Err() != context.Canceled || context.Cause(c) != context.Canceled {
			t.Fatalf("after stop: derived Err %v, Cause %v; want Canceled", derived.Err(), context.Cause(c))
		}
		other := newCallContext(context.Background(), rateClock{start: time.Now(), rate: 2}, time.Hour)
		if _, ok := other.Deadline(); ok {
			t.Error("a call context on another Clock reports a deadline on the real clock")
		}
		other.stop()
	})
}

// TestTermTimerLateEnd: the term timer of a campaign times one term at a time. The end
// of an earlier term that comes after the next term started (a Resign racing the
// step-down) leaves the next term's timer armed, so the next term still ends at its
// deadline without any goroutine looking at it.
func TestTermTimerLateEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timer := newTermTimer(time.Now, realClock{})
		first := newTermContextOn(context.Background(), 1, time.Now(), 10*time.Second, timer)
		first.cancel(ErrLeaseLost) // ended; its end (the timer's stop) comes late
		second := newTermContextOn(context.Background(), 2, time.Now(), 10*time.Second, timer)
		first.end(ErrResigned)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// The embedded context: no lazy check of the clock, only the timer ends it.
		if second.Context.Err() == nil || !errors.Is(context.Cause(second), ErrRenewDeadlineMissed) {
			t.Fatalf("next term at its deadline: Err %v, Cause %v", second.Context.Err(), context.Cause(second))
		}
		second.end(ErrLeaseLost)
	})
}

// TestTermTimerAllocations: on the real clock a term costs the term context and its
// cancel-cause context, no timer: the campaign's timer is re-armed.
func TestTermTimerAllocations(t *testing.T) {
	timer := newTermTimer(time.Now, realClock{})
	parent := context.Background()
	n := testing.AllocsPerRun(100, func() {
		tc := newTermContextOn(parent, 1, time.Now(), time.Hour, timer)
		tc.end(ErrLeaseLost)
	})
	if n != 3 {
		t.Errorf("a term context costs %.0f allocations, want 3 (struct, cancel-cause context, cancel function)", n)
	}
}

// TestNotifierOrder: OnNewLeader gets every pushed identity once, in the order of
// push, while pushes race deliveries and after close.
func TestNotifierOrder(t *testing.T) {
	var got []string
	n := newNotifier(func(identity string) { got = append(got, identity) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.run()
	}()
	var want []string
	for i := range 1000 {
		identity := string(rune('a' + i%26))
		want = append(want, identity)
		n.push(identity)
	}
	n.close()
	<-done
	if len(got) != len(want) {
		t.Fatalf("delivered %d identities, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivery %d is %q, want %q", i, got[i], want[i])
		}
	}
}

// TestCallContextConcurrent: goroutines that wait on a call context, check it and
// derive from it at once all get the same Done channel, and stop ends them all (run
// with the race detector).
func TestCallContextConcurrent(t *testing.T) {
	for _, clock := range []Clock{realClock{}, rateClock{start: time.Now(), rate: 2}} {
		c := newCallContext(context.Background(), clock, time.Hour)
		const n = 8
		dones := make(chan (<-chan struct{}), n)
		derived := make(chan context.Context, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				if i%2 == 0 {
					d, cancel := context.WithCancel(c)
					t.Cleanup(cancel)
					derived <- d
				}
				_ = c.Err()
				dones <- c.Done()
			})
		}
		close(start)
		wg.Wait()
		close(dones)
		close(derived)
		first := c.Done()
		for d := range dones {
			if d != first {
				t.Fatal("two Done channels for one call context")
			}
		}
		c.stop()
		<-first
		for d := range derived {
			<-d.Done()
			if context.Cause(d) != context.Canceled {
				t.Errorf("derived context's cause %v, want Canceled", context.Cause(d))
			}
		}
	}
}
