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
	if b.state.Load() != stateStarted {
		return b.publishSlow(e, 0, false)
	}
	return b.deliver(e, b.seq.Load(), false) // the publish begins here (see NextSequence)
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
			"type", dropped, "capacity", b.capacity, "droppedTotal", total)
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
	t := b.routes.Load().topics[name]
	if t == nil {
		if t = b.topicFor(name); t == nil {
			return 0
		}
	}
	return b.deliverTo(t, e, seq, replay)
}

// deliverTo offers e to each route of t, its topic, in order, under t.mu,
// and returns how many queued it. A replay skips the routes that were
// given an event of the type stamped at or after seq.
//
// Never call out under a lock: a drop a Critical subscriber must hear of is
// reported with t.mu let go. Meanwhile routes may come, which this delivery
// does not offer e to, and go, which it skips (see topic.routes).
func (b *EventBus) deliverTo(t *topic, e Event, seq uint64, replay bool) int {
	if replay {
		t.replayed.Add(1)
	}
	n := 0
	t.mu.Lock()
	for _, r := range t.routes { // the slice as it is now, whatever happens to t.routes
		if r.left || replay && r.lastSeq >= seq {
			continue
		}
		var res sendResult
		var ev eviction
		if r.ch != nil { // eventSink.send, inlined: the common case, on the hot path
			select {
			case r.ch <- e:
				n++
				r.delivered++
				r.lastSeq = max(r.lastSeq, seq)
				continue
			default:
				res = sendFull
			}
		} else {
			res, ev = r.sink.send(e, r.key)
		}
		if res == sendOK {
			n++
			r.delivered++
			r.lastSeq = max(r.lastSeq, seq)
			if ev.victim == "" {
				continue
			}
		}
		if d, report := r.drop(res, ev); report {
			t.mu.Unlock()
			b.reportDrop(r.sub, d)
			t.mu.Lock()
		}
	}
	t.mu.Unlock()
	return n
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
	t := &topic{name: name, index: b.nextTopic}
	b.nextTopic++
	for _, u := range old.universal {
		t.addRouteLocked(u.newRouteLocked(t))
	}
	rt := old.clone()
	rt.topics[name] = t
	b.routes.Store(rt)
	return t
}

func (b *EventBus) reportDrop(s *subscription, d Drop) {
	// Log the first drop and then at powers of two, so a subscriber that
	// never reads cannot flood the log.
	if d.Total&(d.Total-1) == 0 {
		b.logger.Warn("critical subscriber buffer full, event dropped",
			"subscriber", d.Subscriber, "type", d.EventType, "droppedTotal", d.Total)
	}
	s.cfg.onDrop(d)
}
