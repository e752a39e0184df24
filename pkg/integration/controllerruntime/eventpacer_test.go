package controllerruntime

import (
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pacedLog records when each paced Event was recorded.
type pacedLog struct {
	mu  sync.Mutex
	at  map[int]time.Time
	ord []int
}

// snapshot returns when each Event was recorded, and the order.
func (l *pacedLog) snapshot() (map[int]time.Time, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.at), slices.Clone(l.ord)
}

func (l *pacedLog) record(i int) func() {
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.at[i] = time.Now()
		l.ord = append(l.ord, i)
	}
}

// TestEventPacerHoldsEventsWhileMovesGoOn: Events queued in a burst are recorded
// together, quiet after the last, and none before; Events queued without a pause are
// recorded lateness after the first at the latest.
func TestEventPacerHoldsEventsWhileMovesGoOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet, lateness = 100 * time.Millisecond, time.Second
		p := newEventPacer(quiet, lateness)
		log := &pacedLog{at: map[int]time.Time{}}
		start := time.Now()
		for i, at := range []time.Duration{0, 20, 50, 90} {
			time.Sleep(time.Until(start.Add(at * time.Millisecond)))
			p.add(log.record(i))
		}
		time.Sleep(quiet - time.Millisecond)
		synctest.Wait()
		if at, _ := log.snapshot(); len(at) != 0 {
			t.Fatalf("%d Events recorded %v after the last of a burst, want none before %v", len(at), quiet-time.Millisecond, quiet)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		at, ord := log.snapshot()
		for i := range 4 {
			if got, want := at[i].Sub(start), 90*time.Millisecond+quiet; got != want {
				t.Errorf("Event %d of the burst recorded at %v, want %v (quiet after the last)", i, got, want)
			}
		}
		if !slices.Equal(ord, []int{0, 1, 2, 3}) {
			t.Errorf("recorded in the order %v, want the order queued", ord)
		}

		// Moves every 50ms for 2.5s: never quiet, so lateness bounds each Event's wait.
		log = &pacedLog{at: map[int]time.Time{}}
		queued := map[int]time.Time{}
		for i := range 50 {
			queued[i] = time.Now()
			p.add(log.record(i))
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(lateness + quiet)
		synctest.Wait()
		at, _ = log.snapshot()
		for i := range 50 {
			at, ok := at[i]
			switch {
			case !ok:
				t.Errorf("Event %d never recorded", i)
			case at.Sub(queued[i]) > lateness:
				t.Errorf("Event %d recorded %v after it was queued, want at most %v", i, at.Sub(queued[i]), lateness)
			}
		}
		if first := at[0].Sub(queued[0]); first != lateness {
			t.Errorf("the first Event of moves without a pause recorded %v after it was queued, want %v", first, lateness)
		}
	})
}

// TestEventPacerFlush: flush records every queued Event at once, in order, and
// waits for one being recorded; a pacer with nothing queued flushes at once; Events
// queued after a flush are paced again. Seeded random bursts, flushed at random
// moments, lose no Event and record none twice.
func TestEventPacerFlush(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 27))
			p := newEventPacer(100*time.Millisecond, time.Second)
			p.flush() // nothing queued
			log := &pacedLog{at: map[int]time.Time{}}
			n := 0
			for range 5 {
				for range rng.IntN(30) {
					i := n
					n++
					slow := rng.IntN(4) == 0
					rec := log.record(i)
					p.add(func() {
						if slow { // an Event whose Lease read is slow
							time.Sleep(30 * time.Millisecond)
						}
						rec()
					})
					time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
				}
				p.flush()
				if at, _ := log.snapshot(); len(at) != n {
					t.Fatalf("seed %d: after flush, %d of %d Events recorded", seed, len(at), n)
				}
			}
			if _, ord := log.snapshot(); len(ord) != n || !slices.IsSorted(ord) {
				t.Errorf("seed %d: recorded %v, want each of 0..%d once, in order", seed, ord, n-1)
			}
		})
	}
}
