package controllerruntime

import (
	"sync"
	"time"
)

// Pacing of a sharded controller's shard Lease Events on one replica: see eventPacer.
const (
	// eventQuiet is how long the ring must not move, nor a shard Event be queued,
	// before the queued ones are recorded: a ring moves in bursts (a stop hands its
	// shards over in quick succession, a join takes its share within tens of
	// milliseconds), one hand-over every few milliseconds.
	eventQuiet = 100 * time.Millisecond
	// eventLateness bounds how late an Event is recorded after it was queued, through
	// moves that never pause that long.
	eventLateness = time.Second
)

// eventPacer holds the Events of a ring's shard Leases on this replica while the ring
// moves, and records them once it paused: eventQuiet after the last move this
// replica saw (any replica's: moved) and the last Event queued, and at most
// eventLateness after each was queued. A ring's moves are Lease writes one after
// another, each hand-over's successor waiting for its write; Event creates written
// among them lengthened the hand-overs' tail (BenchmarkShardMoves, the controller
// kind's rolling restart: creates sent together, while other replicas' shards still
// moved, made single hand-off writes take 20 to 35ms in the API server). Each Event's
// note still names its term, and its time is when it is recorded.
//
// Queued Events are recorded in order, one at a time on the timer's goroutine, each
// record returning once its Event was written, and the ring's moves are checked again
// before each: a move that resumes stops a recording midway, so that at most one
// Event write is under way beside the moves, and only while one is overdue. flush
// records what is queued at once and waits for any being recorded.
type eventPacer struct {
	quiet, lateness time.Duration
	// moved returns when this replica last saw the ring move (Sharder.LastMove), on
	// time.Now's clock; nil: only the Events queued count.
	moved func() time.Time
	done  sync.WaitGroup // one while the timer is armed or its Events are recorded

	// mu guards the fields below.
	mu       sync.Mutex
	queued   []pacedEvent // oldest first
	last     time.Time    // when the newest queued Event came
	timer    *time.Timer  // armed while Events are queued or being recorded
	flushing bool         // flush asked: record what is queued without waiting
}

// pacedEvent is a queued Event's recording and when it was queued.
type pacedEvent struct {
	at     time.Time
	record func()
}

func newEventPacer(quiet, lateness time.Duration, moved func() time.Time) *eventPacer {
	return &eventPacer{quiet: quiet, lateness: lateness, moved: moved}
}

// add queues record, an Event's recording, which returns once the Event was written.
func (p *eventPacer) add(record func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.last = now
	p.queued = append(p.queued, pacedEvent{at: now, record: record})
	if p.timer == nil {
		p.done.Add(1)
		p.timer = time.AfterFunc(p.quiet, p.fire)
	}
}

// fire records the queued Events that are due, one at a time, and waits again for
// the others.
func (p *eventPacer) fire() {
	for {
		var moved time.Time
		if p.moved != nil {
			moved = p.moved() // outside p.mu: the Sharder's own lock
		}
		p.mu.Lock()
		if len(p.queued) == 0 {
			p.timer = nil
			p.mu.Unlock()
			p.done.Done()
			return
		}
		quietAt := p.last
		if moved.After(quietAt) {
			quietAt = moved
		}
		wait := min(time.Until(quietAt.Add(p.quiet)), time.Until(p.queued[0].at.Add(p.lateness)))
		if wait > 0 && !p.flushing {
			p.timer.Reset(wait)
			p.mu.Unlock()
			return
		}
		next := p.queued[0]
		p.queued[0] = pacedEvent{}
		p.queued = p.queued[1:]
		p.mu.Unlock()
		next.record()
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
