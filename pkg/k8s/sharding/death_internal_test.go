package sharding

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// countingDeaths is a DeathWatch that counts its calls whose context has not ended.
type countingDeaths struct {
	mu     sync.Mutex
	active int
	peak   int // the most active at once
	dead   chan struct{}
}

func (c *countingDeaths) Dead(ctx context.Context, _ string) <-chan struct{} {
	c.mu.Lock()
	c.active++
	c.peak = max(c.peak, c.active)
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.active--
		c.mu.Unlock()
	})
	return c.dead
}

func (c *countingDeaths) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

// TestSharedDeathsOneWatch: many concurrent Dead calls for one incarnation share one
// call of the DeathWatch, never two at once; every caller sees the proof; the watch ends when the last caller's context
// ends, and a later call starts a new one.
func TestSharedDeathsOneWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &countingDeaths{dead: make(chan struct{})}
		d := newSharedDeaths(inner)
		const callers = 50
		ctxs := make([]context.Context, callers)
		cancels := make([]context.CancelFunc, callers)
		chans := make([]<-chan struct{}, callers)
		var wg sync.WaitGroup
		for i := range callers {
			ctxs[i], cancels[i] = context.WithCancel(context.Background())
			wg.Go(func() { chans[i] = d.Dead(ctxs[i], "inc") })
		}
		wg.Wait()
		synctest.Wait()
		if n := inner.count(); n != 1 || inner.peak != 1 {
			t.Fatalf("%d watches of one incarnation running, %d at most; want 1", n, inner.peak)
		}
		for i := range callers - 1 {
			cancels[i]()
		}
		synctest.Wait()
		if n := inner.count(); n != 1 {
			t.Fatalf("%d watches running while one caller remains, want 1", n)
		}
		close(inner.dead)
		for i, ch := range chans {
			select {
			case <-ch:
			default:
				t.Fatalf("caller %d did not see the proof", i)
			}
		}
		cancels[callers-1]()
		synctest.Wait()
		if n := inner.count(); n != 0 {
			t.Fatalf("%d watches running after every caller's context ended, want 0", n)
		}
		ctx, cancel := context.WithCancel(context.Background())
		d.Dead(ctx, "inc")
		synctest.Wait()
		if n := inner.count(); n != 1 {
			t.Fatalf("%d watches after a new call, want 1", n)
		}
		cancel()
		synctest.Wait()
	})
}
