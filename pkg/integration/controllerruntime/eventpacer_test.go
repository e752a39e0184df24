package controllerruntime

import (
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
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
		p := newEventPacer(quiet, lateness, nil)
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
			p := newEventPacer(100*time.Millisecond, time.Second, nil)
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

// ringMoves is a ring's last move as a replica saw it (Sharder.LastMove), set by a
// test.
type ringMoves struct {
	mu   sync.Mutex
	last time.Time
}

func (r *ringMoves) move() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = time.Now()
}

func (r *ringMoves) lastMove() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// TestEventPacerWaitsForTheRingToPause: Events are held while the ring moves (other
// replicas' moves, seen by this one, with no Event queued here), recorded quiet after
// its last move; a move during a recording holds the Events not yet written until the
// ring pauses again; the writes never overlap.
func TestEventPacerWaitsForTheRingToPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet, lateness, write = 100 * time.Millisecond, time.Second, 10 * time.Millisecond
		ring := &ringMoves{}
		p := newEventPacer(quiet, lateness, ring.lastMove)
		log := &pacedLog{at: map[int]time.Time{}}
		var writing atomic.Int32
		written := func(i int) func() { // a write that takes 10ms, logged when done
			rec := log.record(i)
			return func() {
				if writing.Add(1) > 1 {
					t.Errorf("Event %d written while another was", i)
				}
				time.Sleep(write)
				writing.Add(-1)
				rec()
			}
		}
		start := time.Now()
		for i := range 3 {
			p.add(written(i))
		}
		for range 8 { // the ring moves every 50ms until 400ms
			time.Sleep(50 * time.Millisecond)
			ring.move()
		}
		time.Sleep(quiet - time.Millisecond)
		synctest.Wait()
		if at, _ := log.snapshot(); len(at) != 0 {
			t.Fatalf("%d Events written %v after the ring's last move, want none before %v", len(at), quiet-time.Millisecond, quiet)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		at, _ := log.snapshot()
		for i := range 3 {
			if got, want := at[i].Sub(start), 400*time.Millisecond+quiet+time.Duration(i+1)*write; got != want {
				t.Errorf("Event %d written at %v, want %v (quiet after the ring's last move, one write after another)", i, got, want)
			}
		}

		// Five Events; the ring moves while the first is written: the other four wait
		// for quiet after that move.
		log = &pacedLog{at: map[int]time.Time{}}
		start = time.Now()
		for i := range 5 {
			p.add(written(i))
		}
		time.Sleep(quiet + write/2)
		ring.move() // at 105ms, during the first write
		time.Sleep(time.Second)
		synctest.Wait()
		at, ord := log.snapshot()
		if got, want := at[0].Sub(start), quiet+write; got != want {
			t.Errorf("the first Event written at %v, want %v", got, want)
		}
		for i := 1; i < 5; i++ {
			if got, want := at[i].Sub(start), quiet+write/2+quiet+time.Duration(i)*write; got != want {
				t.Errorf("Event %d written at %v, want %v (quiet after the move during the first write)", i, got, want)
			}
		}
		if !slices.Equal(ord, []int{0, 1, 2, 3, 4}) {
			t.Errorf("written in the order %v, want the order queued", ord)
		}

		// A ring that never pauses: each Event is written lateness after it was queued.
		log = &pacedLog{at: map[int]time.Time{}}
		queued := map[int]time.Time{}
		for step := range 200 { // the ring moves every 10ms for 2s; an Event every 200ms at first
			if i := step / 20; step%20 == 0 && i < 3 {
				queued[i] = time.Now()
				p.add(written(i))
			}
			ring.move()
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		at, _ = log.snapshot()
		for i := range 3 {
			if got, want := at[i].Sub(queued[i]), lateness+write; got != want {
				t.Errorf("Event %d, queued while the ring never paused, written %v after, want %v", i, got, want)
			}
		}
		p.flush()
	})
}

// offsetClock is a ring clock an hour ahead of time.Now.
type offsetClock struct{}

func (offsetClock) Now() time.Time { return time.Now().Add(time.Hour) }
func (offsetClock) AfterFunc(d time.Duration, f func()) k8sle.Timer {
	return time.AfterFunc(d, f)
}

// TestShardEventsPaceOnTheRingsClockOnly: the pacer follows the ring's moves when the
// ring runs on time.Now's clock; on a clock of its own (an hour ahead here), whose
// LastMove would hold every Event until its lateness, it paces by the Events alone.
func TestShardEventsPaceOnTheRingsClockOnly(t *testing.T) {
	if lastMoveOf(&Sharded{}) == nil {
		t.Error("a ring on time.Now's clock: the pacer does not follow its moves")
	}
	if lastMoveOf(&Sharded{config: sharding.Config{Clock: offsetClock{}}}) != nil {
		t.Error("a ring on a clock of its own: the pacer follows its moves, on another clock")
	}
}
