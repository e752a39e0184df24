package events

// sendResult is the outcome of a non-blocking send to a subscriber.
type sendResult int

const (
	sendOK       sendResult = iota
	sendFull                // the buffer is full
	sendMismatch            // the event is not of the channel's Go type
)

// sink is the channel behind a subscription. Its methods are called with the
// subscription's mutex held, so there is never more than one sender.
type sink interface {
	trySend(e Event) sendResult
	// evictFor makes room for e, of type typ, in a full buffer by removing
	// one queued event: the oldest one superseded by a newer event of its
	// type (e included) among the latest-value types, or else the oldest one
	// of a type that is not latest-value. It reports the type removed and
	// whether it was superseded state, or ok false if nothing could go.
	evictFor(e Event, typ string, latest map[string]bool) (victim string, superseded, ok bool)
	close()
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

func (s eventSink) evictFor(e Event, typ string, latest map[string]bool) (string, bool, bool) {
	return evict(s.ch, e, typ, latest)
}

func (s eventSink) close() { close(s.ch) }

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

func (s typedSink[T]) evictFor(e Event, typ string, latest map[string]bool) (string, bool, bool) {
	return evict(s.ch, e.(T), typ, latest)
}

func (s typedSink[T]) close() { close(s.ch) }

// evict drains ch, removes one event as evictFor describes, puts the rest
// back in order and queues e after them. The reader may take events
// meanwhile; it only ever takes from the front, so the order it sees is
// unchanged. The caller is the only sender.
func evict[T Event](ch chan T, e T, typ string, latest map[string]bool) (victim string, superseded, ok bool) {
	queued := make([]T, 0, cap(ch))
drain:
	for {
		select {
		case v := <-ch:
			queued = append(queued, v)
		default:
			break drain
		}
	}
	victimAt := -1
	if len(queued) == cap(ch) {
		types := make([]string, len(queued))
		for i, v := range queued {
			types[i] = v.EventType()
		}
		victimAt, superseded = pickVictim(types, typ, latest)
	}
	// None of these sends can block: they put back at most what was taken.
	for i, v := range queued {
		if i != victimAt {
			ch <- v
		}
	}
	if victimAt < 0 && len(queued) == cap(ch) {
		return "", false, false
	}
	ch <- e
	if victimAt >= 0 {
		return queued[victimAt].EventType(), superseded, true
	}
	return "", false, true
}

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
