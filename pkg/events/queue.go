package events

import (
	"slices"
	"sync"
)

// sendResult is the outcome of a non-blocking send to a subscriber.
type sendResult int

const (
	sendOK       sendResult = iota
	sendFull                // the buffer is full
	sendMismatch            // the event is not of the channel's Go type
)

// sink is the queue behind a subscription. Its methods are called with the
// subscription's mutex held, so there is never more than one sender.
type sink interface {
	trySend(e Event) sendResult
	// evictFor makes room for e, of type typ, in a full queue by removing
	// one queued event: the oldest one superseded by a newer event of its
	// type (e included) among the latest-value types, or else the oldest one
	// of a type that is not latest-value. It reports the type removed and
	// whether it was superseded state, or ok false if nothing could go.
	// Only sinks of LatestValue subscriptions can.
	evictFor(e Event, typ string, latest map[string]bool) (victim string, superseded, ok bool)
	// close ends the sink and closes its channel, at once or (wait) soon.
	close()
	// wait returns once the channel is closed. It is called without the
	// subscription's mutex.
	wait()
}

// eventSink is the sink of the untyped subscriptions.
type eventSink struct{ ch chan Event }

func (s eventSink) trySend(e Event) sendResult {
	select {
	case s.ch <- e:
		return sendOK
	default:
		return sendFull
	}
}

func (eventSink) evictFor(Event, string, map[string]bool) (string, bool, bool) {
	return "", false, false
}

func (s eventSink) close() { close(s.ch) }

func (eventSink) wait() {}

// typedSink is the sink of Subscribe[T].
type typedSink[T Event] struct{ ch chan T }

func (s typedSink[T]) trySend(e Event) sendResult {
	v, ok := e.(T)
	if !ok {
		return sendMismatch
	}
	select {
	case s.ch <- v:
		return sendOK
	default:
		return sendFull
	}
}

func (typedSink[T]) evictFor(Event, string, map[string]bool) (string, bool, bool) {
	return "", false, false
}

func (s typedSink[T]) close() { close(s.ch) }

func (typedSink[T]) wait() {}

// pickVictim chooses which of the queued event types (oldest first) gives
// way to a new event of type typ; see sink.evictFor.
func pickVictim(types []string, typ string, latest map[string]bool) (at int, superseded bool) {
	// A latest-value event is superseded when a later one of its type is
	// queued, or when it has the new event's type.
	newer := map[string]bool{typ: true}
	oldest := -1
	for i := len(types) - 1; i >= 0; i-- {
		t := types[i]
		if latest[t] && newer[t] {
			oldest = i
		}
		newer[t] = true
	}
	if oldest >= 0 {
		return oldest, true
	}
	for i, t := range types {
		if !latest[t] {
			return i, false
		}
	}
	return -1, false
}

// latestSink is the sink of LatestValue subscriptions. Events wait in a
// queue that the bus can edit, and a pump goroutine, owned by the sink,
// hands them one at a time to the subscriber's unbuffered channel. A channel
// buffer could not be edited safely while its reader takes from it.
type latestSink[T Event] struct {
	mu    *sync.Mutex // the subscription's; guards queue
	queue []Event     // oldest first, at most size
	size  int
	out   chan T        // closed by the pump when it exits
	wake  chan struct{} // capacity 1: something was queued
	stop  chan struct{} // closed by close
	done  chan struct{} // closed by the pump when it exits
}

func newLatestSink[T Event](mu *sync.Mutex, size int, out chan T) *latestSink[T] {
	s := &latestSink[T]{
		mu: mu, size: size, out: out, queue: make([]Event, 0, size),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go s.pump()
	return s
}

func (s *latestSink[T]) trySend(e Event) sendResult {
	if _, ok := e.(T); !ok {
		return sendMismatch
	}
	if len(s.queue) >= s.size {
		return sendFull
	}
	s.queue = append(s.queue, e)
	s.signal()
	return sendOK
}

func (s *latestSink[T]) evictFor(e Event, typ string, latest map[string]bool) (string, bool, bool) {
	types := make([]string, len(s.queue))
	for i, q := range s.queue {
		types[i] = q.EventType()
	}
	at, superseded := pickVictim(types, typ, latest)
	if at < 0 {
		return "", false, false
	}
	victim := types[at]
	s.queue = append(slices.Delete(s.queue, at, at+1), e)
	s.signal()
	return victim, superseded, true
}

func (s *latestSink[T]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *latestSink[T]) close() { close(s.stop) }

func (s *latestSink[T]) wait() { <-s.done }

func (s *latestSink[T]) pump() {
	defer close(s.done)
	defer close(s.out)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		e := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		select {
		case s.out <- e.(T):
		case <-s.stop:
			return
		}
	}
}
