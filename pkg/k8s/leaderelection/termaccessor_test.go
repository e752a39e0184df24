package leaderelection

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestTermIsZeroOnlyOnceTheTermEnded: Term reports no term only once the term's
// context has ended, so that a term's work reading Term while its context is live
// always gets its number. Two electors hand a lease back and forth while each term's
// work reads Term in a loop. Before, a step-down cleared the current term before it
// ended the term's context: in that instant Term said 0 under a live context, which
// the harness's check in OnStartedLeading caught about once in a few hundred runs of
// this package.
func TestTermIsZeroOnlyOnceTheTermEnded(t *testing.T) {
	mem := NewMemoryStore("term-accessor")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bad atomic.Int64
	var es [2]*Elector
	done := make(chan error, len(es))
	for i := range es {
		e, err := NewWithStore(testConfig(fmt.Sprint("c", i)), mem, Callbacks{OnStartedLeading: func(ctx context.Context) {
			for ctx.Err() == nil {
				if es[i].Term() == 0 && ctx.Err() == nil {
					bad.Add(1)
				}
			}
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	for _, e := range es {
		go func() { done <- e.Start(ctx) }()
	}
	leader := func() int {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			for i, e := range es {
				if e.IsLeader() {
					return i
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
		t.Fatal("no leader within 5s")
		return -1
	}
	for range 300 {
		l := leader()
		if err := es[l].HandOver(ctx, fmt.Sprint("c", 1-l)); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	for range es {
		<-done
	}
	if n := bad.Load(); n > 0 {
		t.Fatalf("Term() read 0 %d times while the term's context was live", n)
	}
}
