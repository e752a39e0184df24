package events_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// A route counts what it queued and dropped, and stops counting when it
// leaves its topic, while the topic's publishes go on. These randomized
// histories check, against a model, every event each subscriber is queued
// (in order), what Publish and Republish return, and the Delivered and
// Dropped figures of Stats, live and total, through publishes, replays
// with old and new stamps, full buffers, reads, and routes leaving their
// topics: on Unsubscribe, at the end of a leader-only subscription's term
// (its context), at the end of a period after which the subscriber
// subscribes again under the same name (as a leader-only component does
// in every term), on Stop, and from Critical callbacks in the middle of a
// delivery, which may also start subscriptions. Each time routes leave a
// topic, late publishes are delivered to it (through a hook of the bus,
// while the subscription's counters are not read yet), as by a publisher
// that looked the topic up just before: they must count for the routes
// still there and for none that left. A failing seed replays with
// -run 'TestRandomFanOutAccounting/seed=N'.
func TestRandomFanOutAccounting(t *testing.T) {
	var late, lateQueued, resumed int
	for seed := range uint64(300) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			m := runFanOutHistory(t, seed)
			late, lateQueued, resumed = late+m.lateSent, lateQueued+m.lateQueued, resumed+m.resumed
		})
	}
	// The histories must have exercised the hook, and deliveries to the
	// routes that stayed, or they prove nothing about routes leaving.
	if late < 300 || lateQueued < 100 || resumed < 100 {
		t.Fatalf("%d late publishes, %d of them queued, %d resumes: the histories do not exercise routes leaving", late, lateQueued, resumed)
	}
	t.Logf("%d late publishes, %d of them queued by routes that stayed; %d subscriptions made again", late, lateQueued, resumed)
}

var fanOutTypes = []string{"a", "b"}

// fanOutSub is the model of one subscription, and its channel.
type fanOutSub struct {
	name     string
	ch       <-chan busevents.Event // a subscription on chan Event, or
	typed    <-chan *ev             // one on a concrete type
	types    []string
	critical bool
	live     bool
	buffer   int
	queue    []int             // values of the events queued, unread
	lastSeq  map[string]uint64 // newest stamp queued, per type
	counts   map[string][2]uint64
	// endTerm, for a leader-only subscription made under a term's
	// context, ends the term.
	endTerm context.CancelFunc
	// resumable, if set, makes the subscription anew under its name in
	// every period: endPeriod ends the current one; paused says that it
	// ended and the next has not begun, and period holds the counts when
	// the last one began (the live figures of Stats count from there).
	resumable bool
	endPeriod context.CancelFunc
	paused    bool
	period    map[string][2]uint64
}

type fanOutModel struct {
	t    *testing.T
	rng  *rand.Rand
	bus  *busevents.EventBus
	subs []*fanOutSub // in the order they subscribed: the order of delivery
	plan []action     // what the next Critical callbacks do
	next int          // value of the last event
	made int
	// late is set while the bus delivers late publishes from its hook:
	// a Critical callback must not call the bus then (it holds its lock).
	late bool
	// nested is set while a Critical callback runs: a late publish then
	// would overtake the delivery in progress, which the model cannot
	// order, so the hook makes none.
	nested bool
	// stamps lists the sequence numbers NextSequence returned, in order.
	stamps []uint64
	// lateSent counts the late publishes made, and lateQueued those that
	// some subscriber queued.
	lateSent, lateQueued int
	// resumed counts the subscriptions made again in a new period.
	resumed int
}

// stamp returns the stamp of a publish made now.
func (m *fanOutModel) stamp() uint64 { return m.stamps[len(m.stamps)-1] }

func runFanOutHistory(t *testing.T, seed uint64) *fanOutModel {
	m := &fanOutModel{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	m.bus = busevents.NewEventBusWithLogger(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	busevents.SetRouteLeftHook(m.bus, m.routesLeft)
	m.bus.Start()
	m.stamps = []uint64{m.bus.NextSequence()}
	for range 3 + m.rng.IntN(4) {
		m.busSubscribe(m.subscribe())
	}
	for range 200 {
		switch k := m.rng.IntN(24); {
		case k < 9:
			m.deliver(m.pickType(), false, m.stamp(), nil)
		case k < 12:
			m.deliver(m.pickType(), true, m.stamps[m.rng.IntN(len(m.stamps))], nil)
		case k < 13:
			m.stamps = append(m.stamps, m.bus.NextSequence())
		case k < 17:
			m.read(m.pick())
		case k < 18:
			m.unsubscribe(m.pick())
		case k < 19:
			m.endTerm(m.pick())
		case k < 20:
			m.checkStats()
		case k < 21:
			m.pause(m.pick())
		case k < 22:
			m.resume()
		default:
			m.busSubscribe(m.subscribe())
		}
	}
	for _, s := range m.subs {
		s.live = false // Stop ends them all
	}
	m.bus.Stop()
	for _, s := range m.subs {
		s.paused = false
		m.read(s) // to the end: the channel is closed
	}
	m.checkTotals()
	return m
}

func (m *fanOutModel) pickType() string { return fanOutTypes[m.rng.IntN(len(fanOutTypes))] }

// pick returns a random live subscription, or nil.
func (m *fanOutModel) pick() *fanOutSub {
	var live []*fanOutSub
	for _, s := range m.subs {
		if s.live {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[m.rng.IntN(len(live))]
}

// subscribe adds a subscription to the model, and to the bus unless it is
// made by a Critical callback, which calls bus.
func (m *fanOutModel) subscribe() *fanOutSub {
	m.made++
	s := &fanOutSub{name: fmt.Sprint("s", m.made), buffer: 1 + m.rng.IntN(4), live: true,
		critical: m.rng.IntN(3) == 0, lastSeq: map[string]uint64{}, counts: map[string][2]uint64{}}
	s.types = fanOutTypes[:1+m.rng.IntN(2)]
	if m.rng.IntN(3) == 0 {
		s.types = []string{fanOutTypes[1]}
	}
	if m.rng.IntN(3) == 0 {
		s.endTerm = func() {} // made a term's subscription by busSubscribe
	} else {
		s.resumable = m.rng.IntN(3) == 0
	}
	m.subs = append(m.subs, s)
	return s
}

// busSubscribe makes s on the bus: a leader-only subscription, under the
// context of a term of its own if the model chose so.
func (m *fanOutModel) busSubscribe(s *fanOutSub) {
	opts := []busevents.SubscribeOption{busevents.Types(s.types[0], s.types[1:]...)}
	if s.critical {
		opts = append(opts, busevents.Critical(func(busevents.Drop) { m.onDrop() }))
	}
	ctx := busevents.WithLeaderOnly(context.Background())
	if s.resumable {
		ctx, s.endPeriod = context.WithCancel(ctx)
		s.ch = busevents.Subscribe[busevents.Event](ctx, m.bus, s.name, s.buffer, opts...)
		return
	}
	if s.endTerm != nil {
		ctx, s.endTerm = context.WithCancel(ctx)
	}
	if m.rng.IntN(3) == 0 {
		s.typed = busevents.Subscribe[*ev](ctx, m.bus, s.name, s.buffer, opts...)
		return
	}
	s.ch = busevents.Subscribe[busevents.Event](ctx, m.bus, s.name, s.buffer, opts...)
}

// recv receives the value of the next event of s, or reports that its
// channel is closed. Both must happen at once (a subscription's end may
// take a moment, on a goroutine of the bus's): a channel that gives
// neither fails the test rather than hanging it.
func (s *fanOutSub) recv(t *testing.T) (int, bool) {
	timeout := time.After(10 * time.Second)
	select {
	case e, ok := <-s.typed:
		if !ok {
			return 0, false
		}
		return e.Value, true
	case e, ok := <-s.ch:
		if !ok {
			return 0, false
		}
		return e.(*ev).Value, true
	case <-timeout:
		t.Fatalf("%s: no event and no end of the channel within 10s", s.name)
		return 0, false
	}
}

// pending returns how many events wait in the channel of s.
func (s *fanOutSub) pending() int { return len(s.ch) + len(s.typed) }

func (s *fanOutSub) unsubscribe(b *busevents.EventBus) {
	if s.typed != nil {
		busevents.Unsubscribe(b, s.typed)
		return
	}
	busevents.Unsubscribe(b, s.ch)
}

// action is what a Critical callback does, planned by the model.
type action struct {
	end, start *fanOutSub
}

// onDrop runs on the publishing goroutine, in the middle of a delivery,
// with no lock held (but from a late publish, see fanOutModel.late): it
// does what the model planned for this drop.
func (m *fanOutModel) onDrop() {
	if len(m.plan) == 0 {
		m.t.Fatal("a Critical callback the model did not expect")
	}
	a := m.plan[0]
	m.plan = m.plan[1:]
	m.nested = true
	defer func() { m.nested = false }()
	if a.end != nil {
		a.end.unsubscribe(m.bus)
	}
	if a.start != nil {
		m.busSubscribe(a.start)
	}
}

func (m *fanOutModel) unsubscribe(s *fanOutSub) {
	if s == nil {
		return
	}
	s.live = false
	s.unsubscribe(m.bus)
}

// endTerm ends the term of s, if it has one, and waits until the bus has
// ended the subscription: the bus does so on a goroutine of its own, which
// runs the hook, and so the model, while this one waits for the channel
// to close without looking at the model.
func (m *fanOutModel) endTerm(s *fanOutSub) {
	if s == nil || s.endTerm == nil {
		return
	}
	s.live = false
	s.endTerm()
	var got []int
	for v, ok := s.recv(m.t); ok; v, ok = s.recv(m.t) {
		got = append(got, v)
	}
	if !slices.Equal(got, s.queue) {
		m.t.Fatalf("%s: read %v to the end of its term, model says %v", s.name, got, s.queue)
	}
	s.queue = nil
}

// pause ends the period of s, if it is resumable, and waits until the bus
// has ended the subscription (as endTerm does): its routes leave their
// topics, its counts so far are in Totals, and its channel, closed, gives
// what it held and nothing more.
func (m *fanOutModel) pause(s *fanOutSub) {
	if s == nil || !s.resumable {
		return
	}
	s.live = false
	s.endPeriod()
	var got []int
	for v, ok := s.recv(m.t); ok; v, ok = s.recv(m.t) {
		got = append(got, v)
	}
	if !slices.Equal(got, s.queue) {
		m.t.Fatalf("%s: read %v to the end of its period, model says %v", s.name, got, s.queue)
	}
	s.queue, s.paused = nil, true
}

// resume begins a new period for a paused subscription, if any, and
// subscribes again under its name: a new channel, routed afresh, last in
// the order of delivery, as a new subscription that has been given
// nothing.
func (m *fanOutModel) resume() {
	i := slices.IndexFunc(m.subs, func(s *fanOutSub) bool { return s.paused })
	if i < 0 {
		return
	}
	s := m.subs[i]
	m.busSubscribe(s)
	s.live, s.paused, s.queue, s.lastSeq = true, false, nil, map[string]uint64{}
	s.period = maps.Clone(s.counts)
	m.resumed++
	m.subs = append(slices.Delete(m.subs, i, i+1), s)
}

// routesLeft is the bus's hook: routes have just left the topic of typ,
// and the subscriptions they belong to are not ended yet. It delivers a
// few late publishes there.
func (m *fanOutModel) routesLeft(typ string, deliver func(busevents.Event) int) {
	if m.nested || m.late {
		return
	}
	m.late = true
	defer func() { m.late = false }()
	for range m.rng.IntN(3) {
		m.lateSent++
		if m.deliver(typ, false, m.stamp(), deliver) > 0 {
			m.lateQueued++
		}
	}
}

// deliver publishes (or republishes, stamped seq) an event of type typ
// (with late, if not nil) and checks what the bus returns against the
// model, which walks the subscriptions in the order they were made, as the
// bus does: one that a Critical callback ends is not offered the event if
// not reached yet, and one it starts is not offered it.
func (m *fanOutModel) deliver(typ string, replay bool, seq uint64, late func(busevents.Event) int) int {
	m.next++
	want := 0
	for _, s := range slices.Clone(m.subs) {
		if !s.live || !slices.Contains(s.types, typ) || replay && s.lastSeq[typ] >= seq {
			continue
		}
		c := s.counts[typ]
		if len(s.queue) == s.buffer {
			c[1]++
			s.counts[typ] = c
			if s.critical {
				m.plan = append(m.plan, m.planDrop())
			}
			continue
		}
		c[0]++
		s.counts[typ] = c
		s.queue = append(s.queue, m.next)
		s.lastSeq[typ] = max(s.lastSeq[typ], seq)
		want++
	}
	var got int
	switch e := newEv(typ, m.next); {
	case late != nil:
		got = late(e)
	case replay:
		got = m.bus.Republish(e, seq)
	default:
		got = m.bus.Publish(e)
	}
	if got != want || len(m.plan) != 0 {
		m.t.Fatalf("event %d (%s, replay %v, late %v, seq %d): queued by %d subscribers, model says %d; %d planned callbacks not made",
			m.next, typ, replay, late != nil, seq, got, want, len(m.plan))
	}
	return got
}

// planDrop chooses what the callback of a drop does, and does it to the
// model. A late publish's callback does nothing: the bus's lock is held.
func (m *fanOutModel) planDrop() action {
	var a action
	if m.late {
		return a
	}
	switch m.rng.IntN(4) {
	case 0:
		if a.end = m.pick(); a.end != nil {
			a.end.live = false
		}
	case 1:
		a.start = m.subscribe()
	}
	return a
}

// read takes a random number of events from s's channel (all of them once
// it is closed) and checks them against the model.
func (m *fanOutModel) read(s *fanOutSub) {
	if s == nil {
		return
	}
	n := len(s.queue)
	if (s.live || s.paused) && m.bus.Started() {
		if s.pending() != n {
			m.t.Fatalf("%s: %d events pending, model says %d: %v", s.name, s.pending(), n, s.queue)
		}
		n = m.rng.IntN(n + 1)
	}
	for i := range n {
		v, ok := s.recv(m.t)
		if !ok {
			m.t.Fatalf("%s: channel closed with %d events still to come: %v", s.name, n-i, s.queue)
		}
		if v != s.queue[0] {
			m.t.Fatalf("%s: read event %d, model says %d (queue %v)", s.name, v, s.queue[0], s.queue)
		}
		s.queue = s.queue[1:]
	}
	if !s.live && !s.paused || !m.bus.Started() {
		if v, ok := s.recv(m.t); ok {
			m.t.Fatalf("%s: ended, yet event %d follows what the model queued", s.name, v)
		}
	}
}

// checkStats compares the live subscriptions of Stats with the model:
// their Delivered and Dropped figures, and the events pending in their
// channels, which add up to what was offered to them.
func (m *fanOutModel) checkStats() {
	live := map[string]busevents.SubscriberStats{}
	for _, st := range m.bus.Stats().Subscribers {
		live[st.Name] = st
	}
	for _, s := range m.subs {
		st, ok := live[s.name]
		if ok != s.live {
			m.t.Fatalf("%s: listed in Stats %v, live in the model %v", s.name, ok, s.live)
		}
		if !ok {
			continue
		}
		m.compare(s, st, "live", s.period)
		if s.pending() != len(s.queue) {
			m.t.Fatalf("%s: %d events pending, model says %d", s.name, s.pending(), len(s.queue))
		}
	}
}

// checkTotals compares the bus's Delivered and Dropped totals, per
// subscriber and type, with the model's, once every subscription ended.
func (m *fanOutModel) checkTotals() {
	totals := map[string]busevents.SubscriberStats{}
	for _, st := range m.bus.Stats().Totals {
		totals[st.Name] = st
	}
	for _, s := range m.subs {
		m.compare(s, totals[s.name], "total", nil)
	}
}

// compare compares st with the counts of s, less those of from.
func (m *fanOutModel) compare(s *fanOutSub, st busevents.SubscriberStats, what string, from map[string][2]uint64) {
	for _, typ := range fanOutTypes {
		c, f := s.counts[typ], from[typ]
		if st.Delivered[typ] != c[0]-f[0] || st.Dropped[typ] != c[1]-f[1] {
			m.t.Fatalf("%s %s (%s): delivered %d dropped %d, model says %d and %d",
				s.name, typ, what, st.Delivered[typ], st.Dropped[typ], c[0]-f[0], c[1]-f[1])
		}
	}
}

// TestConcurrentLeaveAccounting ends subscriptions (Unsubscribe, the end
// of a leader-only term, Stop) at random points while publishers publish
// and republish concurrently, with readers that keep up, fall behind or
// read only once their subscription has ended, and then checks, for every
// subscription and event type, that
//   - Delivered is what its reader received before the channel closed,
//     although its topics' publishes go on after the route has left;
//   - Dropped is the number of Critical callbacks, for a Critical one;
//   - Delivered + Dropped lies between the publishes made wholly while it
//     was subscribed and those that overlapped it;
//   - Delivered, over all subscriptions, is what Publish and Republish
//     returned, added up.
//
// The schedule is the machine's, so a failure need not replay; the seed
// (in the subtest's name) replays the choices.
func TestConcurrentLeaveAccounting(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runConcurrentLeaves(t, seed) })
	}
}

var leaveTypes = []string{"a", "b", "c"}

// typeCounts is a count per event type of leaveTypes.
type typeCounts [3]atomic.Uint64

func (c *typeCounts) load() (v [3]uint64) {
	for i := range c {
		v[i] = c[i].Load()
	}
	return v
}

// publishCounts counts the publishes begun and ended, per type: all of
// them, and the Publish calls alone (a Republish may be refused by a
// route that has newer state).
type publishCounts struct {
	begun, ended, queued       typeCounts
	publishBegun, publishEnded typeCounts
}

// leaveSub is a subscription of the concurrent test.
type leaveSub struct {
	name     string
	types    []string
	critical bool
	ch       <-chan busevents.Event
	endTerm  context.CancelFunc // nil: ended by Unsubscribe or Stop
	read     chan struct{}      // closed when the reader is to start reading

	received, drops typeCounts
	// What publishCounts said as the subscription was being made, and
	// once it was made; as it was being ended, and once its channel was
	// closed.
	beforeSub, afterSub, beforeEnd, afterEnd [3]uint64
	ended                                    bool
}

func runConcurrentLeaves(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x1ea5e))
	bus := busevents.NewEventBusWithLogger(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	bus.Start()
	var pc publishCounts
	stop := make(chan struct{})
	var publishers sync.WaitGroup
	for p := range 3 {
		prng := rand.New(rand.NewPCG(seed, uint64(p)))
		publishers.Go(func() { publishUntil(bus, prng, &pc, stop) })
	}
	var subs []*leaveSub
	var readers sync.WaitGroup
	subscribe := func() {
		s := newLeaveSub(rng, len(subs))
		subs = append(subs, s)
		s.beforeSub = pc.ended.load()
		s.subscribe(bus, rng)
		s.afterSub = pc.publishBegun.load()
		readers.Go(func() { s.drain(&pc) })
	}
	for range 4 {
		subscribe()
	}
	for range 150 {
		live := liveSubs(subs)
		switch k := rng.IntN(10); {
		case k < 3 || len(live) == 0:
			subscribe()
		case k < 5:
			s := live[rng.IntN(len(live))]
			s.end(bus, &pc)
		case k < 7:
			close(live[rng.IntN(len(live))].readNow())
		default:
			for range rng.IntN(50) {
				runtime.Gosched() // let the publishers publish
			}
		}
	}
	for _, s := range liveSubs(subs) {
		s.beforeEnd = pc.publishEnded.load()
	}
	bus.Stop() // ends the rest, publishers still publishing
	close(stop)
	publishers.Wait()
	for _, s := range subs {
		close(s.readNow())
	}
	readers.Wait()
	checkLeaveAccounting(t, bus, subs, &pc)
}

// publishUntil publishes and republishes events of random types until
// stop is closed.
func publishUntil(bus *busevents.EventBus, rng *rand.Rand, pc *publishCounts, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		i := rng.IntN(len(leaveTypes))
		e := newEv(leaveTypes[i], 0)
		replay := rng.IntN(8) == 0
		pc.begun[i].Add(1)
		var n int
		if replay {
			n = bus.Republish(e, bus.NextSequence())
		} else {
			pc.publishBegun[i].Add(1)
			n = bus.Publish(e)
			pc.publishEnded[i].Add(1)
		}
		pc.ended[i].Add(1)
		pc.queued[i].Add(uint64(n))
	}
}

func newLeaveSub(rng *rand.Rand, i int) *leaveSub {
	s := &leaveSub{name: fmt.Sprint("s", i), critical: rng.IntN(2) == 0, read: make(chan struct{})}
	for _, typ := range leaveTypes {
		if rng.IntN(2) == 0 {
			s.types = append(s.types, typ)
		}
	}
	if len(s.types) == 0 {
		s.types = leaveTypes[i%len(leaveTypes) : i%len(leaveTypes)+1]
	}
	return s
}

func (s *leaveSub) subscribe(bus *busevents.EventBus, rng *rand.Rand) {
	opts := []busevents.SubscribeOption{busevents.Types(s.types[0], s.types[1:]...)}
	if s.critical {
		opts = append(opts, busevents.Critical(func(d busevents.Drop) {
			s.drops[slices.Index(leaveTypes, d.EventType)].Add(1)
		}))
	}
	ctx := busevents.WithLeaderOnly(context.Background())
	if rng.IntN(2) == 0 {
		ctx, s.endTerm = context.WithCancel(ctx)
	}
	s.ch = busevents.Subscribe[busevents.Event](ctx, bus, s.name, 1+rng.IntN(32), opts...)
	if rng.IntN(3) > 0 {
		close(s.read) // a reader that reads from the start
	}
}

// readNow returns the channel to close for the reader to start, and
// makes sure that it is closed once only.
func (s *leaveSub) readNow() chan struct{} {
	select {
	case <-s.read:
		return make(chan struct{})
	default:
		return s.read
	}
}

// end ends s by Unsubscribe or by the end of its term.
func (s *leaveSub) end(bus *busevents.EventBus, pc *publishCounts) {
	s.ended = true
	s.beforeEnd = pc.publishEnded.load()
	if s.endTerm != nil {
		s.endTerm() // the bus ends the subscription on a goroutine of its own
		return
	}
	busevents.Unsubscribe(bus, s.ch)
}

// drain counts what s receives, once it is to read, until its channel
// closes, and then notes the publishes begun so far.
func (s *leaveSub) drain(pc *publishCounts) {
	<-s.read
	for e := range s.ch {
		s.received[slices.Index(leaveTypes, e.EventType())].Add(1)
		if e.(*ev).Value%7 == 0 {
			runtime.Gosched() // a reader that falls behind now and then
		}
	}
	s.afterEnd = pc.begun.load()
}

func liveSubs(subs []*leaveSub) []*leaveSub {
	var live []*leaveSub
	for _, s := range subs {
		if !s.ended {
			live = append(live, s)
		}
	}
	return live
}

func checkLeaveAccounting(t *testing.T, bus *busevents.EventBus, subs []*leaveSub, pc *publishCounts) {
	t.Helper()
	totals := map[string]busevents.SubscriberStats{}
	for _, st := range bus.Stats().Totals {
		totals[st.Name] = st
	}
	var delivered [3]uint64
	for _, s := range subs {
		st := totals[s.name]
		for i, typ := range leaveTypes {
			d, dropped, got := st.Delivered[typ], st.Dropped[typ], s.received[i].Load()
			delivered[i] += d
			if d != got {
				t.Errorf("%s %s: Delivered %d, its reader received %d", s.name, typ, d, got)
			}
			if s.critical && dropped != s.drops[i].Load() {
				t.Errorf("%s %s: Dropped %d, %d Critical callbacks", s.name, typ, dropped, s.drops[i].Load())
			}
			if !slices.Contains(s.types, typ) {
				if d+dropped != 0 {
					t.Errorf("%s %s: not subscribed, yet delivered %d dropped %d", s.name, typ, d, dropped)
				}
				continue
			}
			low := s.beforeEnd[i] - min(s.beforeEnd[i], s.afterSub[i])
			high := s.afterEnd[i] - s.beforeSub[i]
			if d+dropped < low || d+dropped > high {
				t.Errorf("%s %s: delivered %d + dropped %d, yet %d publishes were made while it was subscribed and %d overlapped it",
					s.name, typ, d, dropped, low, high)
			}
		}
	}
	var published, dropped uint64
	for _, st := range totals {
		for _, n := range st.Dropped {
			dropped += n
		}
	}
	for i, typ := range leaveTypes {
		published += pc.ended[i].Load()
		if q := pc.queued[i].Load(); q != delivered[i] {
			t.Errorf("%s: publishes queued %d events, Delivered adds up to %d", typ, q, delivered[i])
		}
	}
	t.Logf("%d subscriptions, %d publishes, %d events delivered, %d dropped", len(subs), published, delivered[0]+delivered[1]+delivered[2], dropped)
}
