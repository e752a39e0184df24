package controllerruntime

import (
	"sync"
	"time"
)

// Pacing of a sharded controller's shard Lease Events on one replica: see eventPacer.
const (
	// eventQuiet is how long no shard Event is queued before the queued ones are
	// recorded: a replica's moves come in bursts (a stop hands its shards over in
	// quick succession, a join takes its share within tens of milliseconds).
	eventQuiet = 100 * time.Millisecond
	// eventLateness bounds how late an Event is recorded after it was queued, through
	// moves that never pause that long.
	eventLateness = time.Second
)

// eventPacer holds the Events of a ring's shard Leases on this replica while its
// shards move, and records them once the moves here paused: eventQuiet after the last
// Event queued, and at most eventLateness after the first. A burst of moves is Lease
// writes the successors wait for; an Event create per move written among them
// doubled the API server's writes in that window and lengthened the hand-overs' tail
// (BenchmarkShardMoves, the controller kind's rolling restart). Each Event's note still names its term, and its
// time is when it is recorded, at most eventLateness late.
//
// Queued Events are recorded in order, one at a time, on the timer's goroutine;
// flush records what is queued at once and waits for any being recorded.
type eventPacer struct {
	quiet, lateness time.Duration
	done            sync.WaitGroup // one while the timer is armed or its Events are recorded

	// mu guards the fields below.
	mu          sync.Mutex
	queued      []func()
	first, last time.Time   // when the oldest and the newest queued Event came
	timer       *time.Timer // armed while Events are queued or being recorded
	flushing    bool        // flush asked: record what is queued without waiting
}

func newEventPacer(quiet, lateness time.Duration) *eventPacer {
	return &eventPacer{quiet: quiet, lateness: lateness}
}

// add queues record, an Event's recording.
func (p *eventPacer) add(record func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if len(p.queued) == 0 {
		p.first = now
	}
	p.last = now
	p.queued = append(p.queued, record)
	if p.timer == nil {
		p.done.Add(1)
		p.timer = time.AfterFunc(p.quiet, p.fire)
	}
}

// fire records the queued Events when they are due, or waits again until they are.
func (p *eventPacer) fire() {
	for {
		p.mu.Lock()
		wait := min(time.Until(p.last.Add(p.quiet)), time.Until(p.first.Add(p.lateness)))
		if wait > 0 && !p.flushing {
			p.timer.Reset(wait)
			p.mu.Unlock()
			return
		}
		q := p.queued
		p.queued = nil
		if len(q) == 0 {
			p.timer = nil
			p.mu.Unlock()
			p.done.Done()
			return
		}
		p.mu.Unlock()
		for _, record := range q {
			record()
		}
		// Events queued while these were recorded: due by their own times.
	}
}

// flush records the queued Events now and returns once none is being recorded.
func (p *eventPacer) flush() {
	p.mu.Lock()
	p.flushing = true
	if p.timer != nil && p.timer.Stop() {
		// Not running: run it here, at once.
		p.mu.Unlock()
		p.fire()
	} else {
		p.mu.Unlock()
	}
	p.done.Wait()
	p.mu.Lock()
	p.flushing = false
	p.mu.Unlock()
}
