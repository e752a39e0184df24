package events

import "sync"

// sendResult is the outcome of offering an event to a subscriber.
type sendResult int

const (
	sendOK       sendResult = iota
	sendFull                // the buffer is full: the event is dropped
	sendMismatch            // the event is not of the channel's Go type
)

// eviction describes a queued event of another type lost to make room
// for newer state (see LatestValue).
type eviction struct {
	victim string // the lost event's type; "" when nothing was lost
	total  uint64 // events of the victim's type this subscriber lost so far
}

// sink is the queue behind a subscription. send is called by publishers
// under the lock of the topic being delivered; several topics may call it
// at once. close is called once, after the bus has made sure that no
// publisher is inside send or will enter it (see EventBus.remove).
type sink interface {
	// send offers e, whose type has LatestValue key key (-1: not
	// LatestValue) in this subscription.
	send(e Event, key int32) (sendResult, eviction)
	close()
	// addEvictions adds, by event type, the events removed from the queue
	// that were lost (of a type not LatestValue) to lost and those skipped
	// (superseded LatestValue state) to skipped. Plain sinks never remove
	// anything and add nothing.
	addEvictions(lost, skipped map[string]uint64)
}

// eventSink is the sink of a subscription on a chan Event: a typedSink
// without the type assertion, which costs more for an interface type.
type eventSink struct{ ch chan Event }

func (s eventSink) send(e Event, _ int32) (sendResult, eviction) {
	select {
	case s.ch <- e:
		return sendOK, eviction{}
	default:
		return sendFull, eviction{}
	}
}

func (s eventSink) close()                            { close(s.ch) }
func (eventSink) addEvictions(_, _ map[string]uint64) {}

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

func (s typedSink[T]) close()                            { close(s.ch) }
func (typedSink[T]) addEvictions(_, _ map[string]uint64) {}

// latestSink is the sink of a LatestValue subscription. The subscriber
// reads a buffered channel, as with any subscription, and as long as the
// subscriber keeps up, publishers send to it directly, as to a plain one.
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

	// mu guards the fields below.
	mu sync.Mutex
	// moving is set while overflow is not empty or the mover holds an
	// event taken from it: publishers then queue in overflow, behind it.
	moving   bool
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.moving {
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
	if !s.moving {
		s.moving = true
		s.startMoverLocked()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return sendOK, ev
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
			s.moving = false
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
