package events

import (
	"sync"
	"sync/atomic"
)

// sendResult is the outcome of offering an event to a subscriber.
type sendResult int

const (
	sendOK       sendResult = iota
	sendFull                // the buffer is full: the event is dropped
	sendMismatch            // the event is not of the channel's Go type
)

// eviction describes a queued event removed to make room for a newer one.
type eviction struct {
	victim     string // the removed event's type; "" when nothing was removed
	superseded bool   // an older version of LatestValue state
	total      uint64 // events of the victim's type this subscriber lost so far
}

// sink is the queue behind a subscription. send is called by publishers
// under the lock of the topic being delivered; several topics may call it
// at once. close is called once, after the bus has made sure that no
// publisher is inside send or will enter it (see EventBus.remove).
type sink interface {
	// send offers e, whose type has LatestValue key key (-1: not
	// LatestValue) in this subscription.
	send(e Event, key int32) (sendResult, eviction)
	// sendRun makes the direct sends of a delivery that sends to route i
	// of a topic, this sink's, whose sinks of direct typed sends are typed
	// (see topic.routes), as long as routes take them, and returns the
	// index it stopped at: i if it sent nothing. A typedSink sends on
	// along the run of routes of its T that follows; a latestSink sends
	// to its own channel only, when nothing waits in its queue; an
	// eventSink sends nothing (deliverTo sends to those itself). The
	// topic's lock is held, and the sends are plain ones: nothing to
	// count or report (see sendDirectRuns).
	sendRun(e Event, typed []sink, i int) int
	close()
	// addEvictions adds, by event type, the events removed from the queue
	// that were lost (of a type not LatestValue) to lost and those skipped
	// (superseded LatestValue state) to skipped. Plain sinks never remove
	// anything and add nothing.
	addEvictions(lost, skipped map[string]uint64)
}

// eventSink is the sink of a subscription on a chan Event. Publishers send
// to ch directly (see subscription.ch); send is the generic path.
type eventSink struct{ ch chan Event }

func (s eventSink) send(e Event, _ int32) (sendResult, eviction) {
	select {
	case s.ch <- e:
		return sendOK, eviction{}
	default:
		return sendFull, eviction{}
	}
}

func (eventSink) sendRun(_ Event, _ []sink, i int) int { return i }
func (s eventSink) close()                             { close(s.ch) }
func (eventSink) addEvictions(_, _ map[string]uint64)  {}

// typedSink is the sink of a subscription on a chan T.
type typedSink[T Event] struct{ ch chan T }

func (s typedSink[T]) send(e Event, _ int32) (sendResult, eviction) {
	v, ok := e.(T)
	if !ok {
		return sendMismatch, eviction{}
	}
	select {
	case s.ch <- v:
		return sendOK, eviction{}
	default:
		return sendFull, eviction{}
	}
}

// sendRun sends e, as a T, to the channel of each sink of typed from index
// i on, as long as they are typedSinks of this T with room, and returns
// the index of the first it did not send to. e's Go type is asserted once
// for the run, not once per sink: with subscribers of one Go type, a
// publish makes one interface call, and then per subscriber a comparison
// of the sink's type word and a non-blocking send, as a fan-out over a
// slice of chan T would.
func (typedSink[T]) sendRun(e Event, typed []sink, i int) int {
	v, ok := e.(T)
	if !ok {
		return i
	}
	for ; i < len(typed); i++ {
		s, ok := typed[i].(typedSink[T])
		if !ok {
			break
		}
		select {
		case s.ch <- v:
			continue
		default:
		}
		break
	}
	return i
}

func (s typedSink[T]) close()                            { close(s.ch) }
func (typedSink[T]) addEvictions(_, _ map[string]uint64) {}

// latestSink is the sink of a LatestValue subscription. The subscriber
// reads a buffered channel, as with any subscription, and as long as the
// subscriber keeps up, publishers send to it directly: the fast path costs
// one uncontended lock more than a plain subscription's.
//
// When the channel is full, events wait in overflow, a queue the bus can
// edit: a new version of LatestValue state replaces the one waiting there
// (the older is skipped), and when overflow is full a new LatestValue event
// takes the place of the oldest waiting event of another type (which is
// lost). A goroutine owned by the sink, the mover, started when an event
// first finds the channel full, moves the waiting events to the channel in
// order as the subscriber makes room; while any wait,
// publishers queue behind them, so the subscriber sees events in the order
// they were published, less the ones removed.
type latestSink[T Event] struct {
	ch    chan T
	names []string // LatestValue types, by key

	// moving is set while overflow is not empty or the mover holds an
	// event taken from it: publishers then queue in overflow. It changes
	// under mu; publishers read it without the lock on the fast path. A
	// publisher that finds it clear while another sets it races that
	// publisher, and concurrent publishes have no defined order anyway;
	// one goroutine's publishes see its own setting in program order.
	moving atomic.Bool

	// mu guards the fields below.
	mu       sync.Mutex
	overflow fifo[T] // class 0: other types; class key+1: LatestValue key
	skipped  []uint64
	lost     map[string]uint64
	// started is set when the mover is started, with the channels below;
	// until then close closes ch itself. A subscriber that keeps up never
	// costs a goroutine.
	started bool
	wake    chan struct{} // capacity 1: overflow has work for the mover
	stop    chan struct{} // closed by close

	done sync.WaitGroup // the mover, which closes ch before it is done
}

// newLatestSink returns a sink for ch. size bounds both the channel and
// overflow, and must exceed len(names) so that there is always an event of
// another type to give way to state (see LatestValue).
func newLatestSink[T Event](ch chan T, size int, names []string) *latestSink[T] {
	return &latestSink[T]{
		ch: ch, names: names,
		overflow: newFIFO[T](size, len(names)+1),
		skipped:  make([]uint64, len(names)),
	}
}

// reset readies a closed sink to serve ch, as a new one would, for a
// subscription record made again (see Scope). The mover, if it ran, has
// returned (close waits for it) and no publisher is in send.
func (s *latestSink[T]) reset(ch chan T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ch = ch
	for _, ok := s.overflow.pop(); ok; _, ok = s.overflow.pop() {
	}
	clear(s.skipped)
	clear(s.lost)
	s.moving.Store(false)
	s.started = false
}

// startMoverLocked starts the mover if it is not running. s.mu must be
// held.
func (s *latestSink[T]) startMoverLocked() {
	if s.started {
		return
	}
	s.started = true
	s.wake, s.stop = make(chan struct{}, 1), make(chan struct{})
	s.done.Add(1)
	go s.move()
}

func (s *latestSink[T]) send(e Event, key int32) (sendResult, eviction) {
	v, ok := e.(T)
	if !ok {
		return sendMismatch, eviction{}
	}
	if !s.moving.Load() {
		select {
		case s.ch <- v:
			return sendOK, eviction{}
		default:
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.moving.Load() {
		// The reader may have made room since; the mover, idle, has
		// nothing older.
		select {
		case s.ch <- v:
			return sendOK, eviction{}
		default:
		}
	}
	ev := eviction{}
	c := key + 1
	if c > 0 {
		if _, ok := s.overflow.removeOldest(c); ok {
			s.skipped[key]++
			ev = eviction{victim: s.names[key], superseded: true}
		}
	}
	if s.overflow.full() {
		if c == 0 {
			return sendFull, eviction{}
		}
		old, ok := s.overflow.removeOldest(0)
		if !ok {
			old, _ = s.overflow.pop() // cannot happen while size > len(names)
		}
		ev = s.loseLocked(old)
	}
	s.overflow.push(v, c)
	if !s.moving.Load() {
		s.moving.Store(true)
		s.startMoverLocked()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return sendOK, ev
}

// sendRun makes the fast path of send for route i, whose sink s is: when e
// is a T, nothing waits in overflow and the channel has room, e goes to
// the channel and sendRun returns i+1. Otherwise it returns i, and the
// delivery offers e through send, which queues it in overflow if need be.
func (s *latestSink[T]) sendRun(e Event, _ []sink, i int) int {
	if v, ok := e.(T); ok && !s.moving.Load() {
		select {
		case s.ch <- v:
			return i + 1
		default:
		}
	}
	return i
}

// loseLocked counts old, removed from overflow for state of another type.
func (s *latestSink[T]) loseLocked(old T) eviction {
	typ := old.EventType()
	if s.lost == nil {
		s.lost = map[string]uint64{}
	}
	s.lost[typ]++
	return eviction{victim: typ, total: s.lost[typ]}
}

// move is the mover: it sends the events waiting in overflow to the
// channel, oldest first, and closes the channel when the sink is closed.
func (s *latestSink[T]) move() {
	defer s.done.Done()
	defer close(s.ch)
	for {
		s.mu.Lock()
		v, ok := s.overflow.pop()
		if !ok {
			s.moving.Store(false)
		}
		s.mu.Unlock()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		select {
		case s.ch <- v:
		case <-s.stop:
			return
		}
	}
}

// close stops the mover, which closes the channel; events still waiting
// in overflow are discarded with the subscription.
func (s *latestSink[T]) close() {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		close(s.ch) // no publisher is in send any more (see sink)
		return
	}
	close(s.stop)
	s.done.Wait()
}

func (s *latestSink[T]) addEvictions(lost, skipped map[string]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.lost {
		lost[k] += v
	}
	for i, v := range s.skipped {
		if v > 0 {
			skipped[s.names[i]] += v
		}
	}
}
