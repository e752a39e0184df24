package events

// Publish delivers e to every subscriber of its type and returns how many
// queued it. It never blocks: a subscriber whose buffer is full loses the
// event (see the package doc on backpressure). Before Start the event is
// held and Publish returns 0; after Stop it is refused, counted in
// Stats().RejectedStopped, and Publish returns 0. A nil or typed-nil event
// is refused, counted in Stats().RejectedNil and never delivered.
func (b *EventBus) Publish(e Event) int {
	if IsNil(e) {
		b.rejectNil()
		return 0
	}
	if b.state.Load() == stateStarted {
		seq := b.seq.Load() // the publish begins here (see NextSequence)
		if t := b.routes.Load().lookup(e.EventType()); t != nil {
			return b.deliverTo(t, e, seq, false)
		}
		return b.deliver(e, seq, false)
	}
	return b.publishSlow(e, 0, false)
}

// NextSequence returns a new sequence number s. A publish that begins after
// NextSequence returned is stamped s or later; one that began before is
// stamped below s. A replayer stamps the state it caches with it, for
// Republish.
//
// Publishes read the sequence rather than advance it: only NextSequence
// writes it, which keeps Publish free of contended atomic writes.
func (b *EventBus) NextSequence() uint64 { return b.seq.Add(1) }

// Republish delivers e, stamped seq by NextSequence, to each subscriber of
// its type that has not already been given an event of that type stamped at
// or after seq, whether by Publish or by Republish. A replayed event thus
// never reaches a subscriber after newer state of its type, and a subscriber
// that holds older state (or none) gets it. It returns how many subscribers
// queued it.
//
// Before Start, and while Start delivers the events held, e is held like a
// published event, and Start delivers it in its place with the same check;
// Republish then returns 0. After Stop it is refused and counted like a
// Publish.
func (b *EventBus) Republish(e Event, seq uint64) int {
	if IsNil(e) {
		b.rejectNil()
		return 0
	}
	if b.state.Load() == stateStarted {
		return b.deliver(e, seq, true)
	}
	return b.publishSlow(e, seq, true)
}

func (b *EventBus) rejectNil() {
	if b.rejectedNil.Add(1) == 1 {
		b.logger.Warn("event bus refused a nil event; further ones are only counted", "caller", caller())
	}
}

// publishSlow handles Publish and Republish before Start and after Stop.
// For a Publish, seq is ignored: the event is stamped now.
func (b *EventBus) publishSlow(e Event, seq uint64, replay bool) int {
	if !replay {
		seq = b.seq.Load()
	}
	b.mu.Lock()
	switch b.state.Load() {
	case stateStarted: // Start completed meanwhile
		b.mu.Unlock()
		return b.deliver(e, seq, replay)
	case stateStopped:
		b.mu.Unlock()
		if b.rejectedStopped.Add(1) == 1 {
			b.logger.Warn("event published after the event bus stopped was refused; further ones are only counted",
				"type", e.EventType(), "caller", caller())
		}
		return 0
	}
	dropped, total := b.holdLocked(pendingEvent{event: e, seq: seq, replay: replay})
	b.mu.Unlock()
	// Log the first drop of a type and then at powers of two.
	if total > 0 && total&(total-1) == 0 {
		b.logger.Warn("event bus not started and its buffer is full; held event dropped",
			"type", dropped, "capacity", b.capacity, "dropped_total", total)
	}
	return 0
}

// holdLocked queues p until Start. When the queue is full and p's type is
// LatestValue for some subscriber, the newest state must win: p takes the
// place of the oldest held event of its own type, or else of the oldest
// held event of a type nobody declared LatestValue, or else of the oldest
// held event. Otherwise p itself is dropped. It returns the type of the
// event dropped, if any, counted in preStartDropped, and that count (0 when
// nothing was dropped). b.mu must be held.
func (b *EventBus) holdLocked(p pendingEvent) (dropped string, total uint64) {
	typ := p.event.EventType()
	class := int32(0)
	rt := b.routes.Load()
	t := rt.topics[typ]
	if t == nil && len(rt.universal) > 0 {
		// A subscriber of every type may declare this one LatestValue.
		t = b.addTopicLocked(typ)
	}
	if t != nil && t.latest > 0 {
		class = int32(t.index) + 1
		b.pending.grow(int(class) + 1)
	}
	if b.pending.full() {
		if class == 0 {
			b.preStartDropped[typ]++
			return typ, b.preStartDropped[typ]
		}
		old, ok := b.pending.removeOldest(class)
		if !ok {
			old, ok = b.pending.removeOldest(0)
		}
		if !ok {
			old, _ = b.pending.pop()
		}
		dropped = old.event.EventType()
		b.preStartDropped[dropped]++
		b.pending.push(p, class)
		return dropped, b.preStartDropped[dropped]
	}
	b.pending.push(p, class)
	return "", 0
}

// deliver routes e to its subscribers.
func (b *EventBus) deliver(e Event, seq uint64, replay bool) int {
	name := e.EventType()
	t := b.routes.Load().lookup(name)
	if t == nil {
		t = b.topicFor(name)
		if t == nil {
			return 0
		}
	}
	return b.deliverTo(t, e, seq, replay)
}

// deliverTo delivers e to the routes of t, its topic.
//
// While it holds t.mu without having let go of it, a delivery of a
// published event sends to each plain subscription directly (on chan
// Event in sendEvents, on another type or LatestValue and keeping up in
// sendDirectRuns, and in deliverFrom after a drop) and writes nothing per
// route: such a route is in t.routes, so its channel is open (see
// topic.routes), its delivered count follows from t.published, and its
// lastSeq needs a write only when seq is above t.seqFloor. Whatever does
// not take that path goes through offerLocked, which checks everything.
func (b *EventBus) deliverTo(t *topic, e Event, seq uint64, replay bool) int {
	n := 0
	t.mu.Lock()
	if replay {
		t.replayed.Add(1)
		n = b.deliverFrom(t, 0, e, seq, true, -1)
	} else {
		t.published++ // counts for every route in t.routes now
		full := -1
		if seq <= t.seqFloor {
			// Every route has lastSeq >= seq: send until a channel is
			// full or the route is not a plain one (the rest are for
			// deliverFrom).
			chans := t.chans
			n = sendEvents(chans, e, 0)
			if n < len(chans) && chans[n] == nil {
				n = sendDirectRuns(t, e, n)
			}
			if n < len(chans) && chans[n] != nil {
				full = n // sendEvents stopped there: its channel is full
			}
		}
		if n < len(t.routes) {
			n += b.deliverFrom(t, n, e, seq, false, full)
		}
	}
	t.mu.Unlock()
	if b.requests.Load() > 0 {
		b.offerResponse(e)
	}
	return n
}

// sendEvents sends e to chans[i], chans[i+1], ... until a channel is nil
// or full, and returns the index of that channel (len(chans) if none):
// the whole of a fan-out to plain subscribers on chan Event.
func sendEvents(chans []chan Event, e Event, i int) int {
	for ; i < len(chans); i++ {
		select {
		case chans[i] <- e: // a nil channel is never ready
			continue
		default:
		}
		break
	}
	return i
}

// sendDirectRuns makes the direct sends of a delivery of e to t, whose
// lock must be held, from route i on, which must not be on chan Event,
// until a route takes none, and returns the index of that route (the rest
// are for deliverFrom). Each route not on chan Event takes its send from
// its sink (see sink.sendRun): a run of routes on chan T costs one type
// assertion, and a LatestValue route that keeps up takes its event
// straight into its channel, as its sink's send would. A run of routes on
// chan Event goes to sendEvents.
//
// No route's state is read or written: t.mu has been held throughout, so
// every route in t.routes is open, and the delivery is stamped at or below
// t.seqFloor (see deliverTo), so no lastSeq needs a write.
func sendDirectRuns(t *topic, e Event, i int) int {
	chans, typed, routes := t.chans, t.typed, t.routes
	for {
		var n int
		if s := typed[i]; s != nil {
			n = s.sendRun(e, typed, i)
		} else {
			n = routes[i].sub.sink.sendRun(e, typed, i)
		}
		n = sendEvents(chans, e, n)
		if n == i || n == len(chans) || chans[n] != nil {
			return n
		}
		i = n
	}
}

// deliverFrom delivers e to the routes of t from index i on, all before
// having been given it, and returns how many queued it. full, if not -1,
// is the index of a route on chan Event whose channel the caller found
// full with t.mu held: it is refused at once rather than tried again.
// t.mu must be held; it may let go of it meanwhile (see
// reportDropUnlocked).
func (b *EventBus) deliverFrom(t *topic, i int, e Event, seq uint64, replay bool, full int) int {
	n := 0
	raise := seq > t.seqFloor
	fast, all := !replay, true // fast: t.mu held throughout, and a Publish
	routes, chans, typed := t.routes, t.chans, t.typed
	for ; i < len(routes); i++ {
		r := routes[i]
		var queued, report bool
		switch {
		case i == full:
			report = r.refusedLocked() // open: t.mu held since it was found full
		case fast && sendDirect(chans, typed, i, e):
			n++
			if raise { // else lastSeq >= t.seqFloor >= seq already
				r.lastSeq = max(r.lastSeq, seq)
			}
			continue
		default:
			queued, report = r.offerLocked(e, seq, replay)
		}
		switch {
		case queued:
			n++
			if !fast {
				r.extra++ // a replay, or after the advance below
			}
		case fast:
			r.extra-- // counted in t.published, yet not queued
			all = false
		}
		if report {
			if fast {
				// Letting go of t.mu, routes may go (closed) or come
				// (not in routes): count the rest as not queued now, and
				// each one that queues once it is offered.
				for _, rest := range routes[i+1:] {
					rest.extra--
				}
				fast = false
			}
			b.reportDropUnlocked(t, r)
		}
	}
	if fast && all && raise {
		t.seqFloor = seq // every route in t.routes has lastSeq >= seq
	}
	return n
}

// sendDirect makes the direct send of e to route i of a topic whose chans
// and typed are given (see topic.routes), if it takes one, and reports
// whether e was queued.
func sendDirect(chans []chan Event, typed []sink, i int, e Event) bool {
	if c := chans[i]; c != nil {
		select {
		case c <- e:
			return true
		default:
			return false
		}
	}
	if s := typed[i]; s != nil {
		res, _ := s.send(e, -1)
		return res == sendOK
	}
	return false
}

// reportDropUnlocked reports the drop r.lastDrop with t.mu, which must be
// held, let go of meanwhile. Never call out under a lock: routes are
// offered one at a time, each under the lock, so letting go of it here
// changes nothing for the others; deliver counts itself in t.iterating
// meanwhile (see topic.routes).
func (b *EventBus) reportDropUnlocked(t *topic, r *route) {
	d := r.lastDrop
	t.iterating++
	t.mu.Unlock()
	b.reportDrop(r.sub, d)
	t.mu.Lock()
	t.iterating--
}

// topicFor returns the topic of an event type seen for the first time,
// creating it (with the universal subscribers, if any) so that later
// publishes of the type find it without locking. It returns nil after Stop.
func (b *EventBus) topicFor(name string) *topic {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.routes.Load()
	if t := old.topics[name]; t != nil {
		return t
	}
	if b.state.Load() == stateStopped {
		return nil
	}
	return b.addTopicLocked(name)
}

// addTopicLocked creates the topic of an event type the route table does not
// have yet, with the universal subscribers, and publishes the new table.
// b.mu must be held.
func (b *EventBus) addTopicLocked(name string) *topic {
	old := b.routes.Load()
	rt := old.clone()
	t := b.newTopicLocked(name, old.universal)
	rt.topics[name] = t
	b.routes.Store(rt)
	return t
}

func (b *EventBus) reportDrop(s *subscription, d Drop) {
	// Log the first drop and then at powers of two, so a subscriber that
	// never reads cannot flood the log.
	if d.Total&(d.Total-1) == 0 {
		b.logger.Warn("critical subscriber buffer full, event dropped",
			"subscriber", d.Subscriber, "type", d.EventType, "dropped_total", d.Total)
	}
	s.cfg.onDrop(d)
}
