package events_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// The fan-out path derives a route's delivered count from its topic's
// publish count, skips per-route writes of lastSeq while the stamp is not
// new, and checks no closed flag while it holds the topic lock. These
// randomized histories check, against a model, every event each
// subscriber is queued (in order), what Publish and Republish return, and
// the Delivered and Dropped totals, through publishes, replays with old
// and new stamps, full buffers, reads, subscriptions ending, and Critical
// callbacks that end or start subscriptions in the middle of a delivery.
// A failing seed replays with -run 'TestRandomFanOutAccounting/seed=N'.
func TestRandomFanOutAccounting(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runFanOutHistory(t, seed) })
	}
}

var fanOutTypes = []string{"a", "b"}

// fanOutSub is the model of one subscription, and its channel.
type fanOutSub struct {
	name     string
	ch       <-chan busevents.Event
	types    []string
	critical bool
	live     bool
	buffer   int
	queue    []int             // values of the events queued, unread
	lastSeq  map[string]uint64 // newest stamp queued, per type
	counts   map[string][2]uint64
}

type fanOutModel struct {
	t    *testing.T
	rng  *rand.Rand
	bus  *busevents.EventBus
	subs []*fanOutSub // in the order they subscribed: the order of delivery
	plan []action     // what the next Critical callbacks do
	next int          // value of the last event
	made int
}

func runFanOutHistory(t *testing.T, seed uint64) {
	m := &fanOutModel{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	m.bus = busevents.NewEventBusWithLogger(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.bus.Start()
	stamps := []uint64{m.bus.NextSequence()}
	for range 3 + m.rng.IntN(4) {
		m.busSubscribe(m.subscribe())
	}
	for range 200 {
		switch k := m.rng.IntN(20); {
		case k < 9:
			m.deliver(false, stamps[len(stamps)-1])
		case k < 12:
			m.deliver(true, stamps[m.rng.IntN(len(stamps))])
		case k < 13:
			stamps = append(stamps, m.bus.NextSequence())
		case k < 17:
			m.read(m.pick())
		case k < 18:
			m.unsubscribe(m.pick())
		default:
			m.busSubscribe(m.subscribe())
		}
	}
	m.bus.Stop()
	for _, s := range m.subs {
		m.read(s) // to the end: the channel is closed
	}
	m.checkTotals()
}

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
	m.subs = append(m.subs, s)
	return s
}

func (m *fanOutModel) busSubscribe(s *fanOutSub) {
	opts := []busevents.SubscribeOption{busevents.Types(s.types[0], s.types[1:]...), busevents.LeaderOnly()}
	if s.critical {
		opts = append(opts, busevents.Critical(func(busevents.Drop) { m.onDrop() }))
	}
	s.ch = busevents.Subscribe[busevents.Event](context.Background(), m.bus, s.name, s.buffer, opts...)
}

// action is what a Critical callback does, planned by the model.
type action struct {
	end, start *fanOutSub
}

// onDrop runs on the publishing goroutine, in the middle of a delivery,
// with no lock held: it does what the model planned for this drop.
func (m *fanOutModel) onDrop() {
	if len(m.plan) == 0 {
		m.t.Fatal("a Critical callback the model did not expect")
	}
	a := m.plan[0]
	m.plan = m.plan[1:]
	if a.end != nil {
		busevents.Unsubscribe(m.bus, a.end.ch)
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
	busevents.Unsubscribe(m.bus, s.ch)
}

// deliver publishes (or republishes, stamped seq) an event of a random
// type and checks what the bus returns against the model, which walks the
// subscriptions in the order they were made, as the bus does: one that a
// Critical callback ends is not offered the event if not reached yet, and
// one it starts is not offered it.
func (m *fanOutModel) deliver(replay bool, seq uint64) {
	typ := fanOutTypes[m.rng.IntN(len(fanOutTypes))]
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
	if e := newEv(typ, m.next); replay {
		got = m.bus.Republish(e, seq)
	} else {
		got = m.bus.Publish(e)
	}
	if got != want || len(m.plan) != 0 {
		m.t.Fatalf("event %d (%s, replay %v, seq %d): queued by %d subscribers, model says %d; %d planned callbacks not made",
			m.next, typ, replay, seq, got, want, len(m.plan))
	}
}

// planDrop chooses what the callback of a drop does, and does it to the
// model.
func (m *fanOutModel) planDrop() action {
	var a action
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
	if s.live && m.bus.Started() {
		n = m.rng.IntN(n + 1)
	}
	for i := range n {
		e, ok := <-s.ch
		if !ok {
			m.t.Fatalf("%s: channel closed with %d events still to come: %v", s.name, n-i, s.queue)
		}
		if v := e.(*ev).Value; v != s.queue[0] {
			m.t.Fatalf("%s: read event %d, model says %d (queue %v)", s.name, v, s.queue[0], s.queue)
		}
		s.queue = s.queue[1:]
	}
	if !s.live || !m.bus.Started() {
		if e, ok := <-s.ch; ok {
			m.t.Fatalf("%s: ended, yet event %d follows what the model queued", s.name, e.(*ev).Value)
		}
	}
}

// checkTotals compares the bus's Delivered and Dropped totals, per
// subscriber and type, with the model's.
func (m *fanOutModel) checkTotals() {
	totals := map[string]busevents.SubscriberStats{}
	for _, st := range m.bus.Stats().Totals {
		totals[st.Name] = st
	}
	for _, s := range m.subs {
		st := totals[s.name]
		for _, typ := range fanOutTypes {
			c := s.counts[typ]
			if st.Delivered[typ] != c[0] || st.Dropped[typ] != c[1] {
				m.t.Errorf("%s %s: delivered %d dropped %d, model says %d and %d",
					s.name, typ, st.Delivered[typ], st.Dropped[typ], c[0], c[1])
			}
		}
	}
}

// TestDeliveredCountsWhatWasRead ends subscriptions while two goroutines
// publish to them: each one's Delivered total must be what its reader got
// before the channel closed, although the count of a route is derived from
// its topic's publishes, which go on after the route has left.
func TestDeliveredCountsWhatWasRead(t *testing.T) {
	const subs, perPublisher = 40, 3000
	bus := busevents.NewEventBusWithLogger(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// Routes to more types widen the time between a route leaving topic
	// "a" and its counters being read.
	var more []string
	for i := range 30 {
		more = append(more, fmt.Sprint("other", i))
	}
	chans := make([]<-chan busevents.Event, subs)
	for i := range chans {
		chans[i] = busevents.Subscribe[busevents.Event](context.Background(), bus, fmt.Sprint("s", i), 8, busevents.Types("a", more...))
	}
	bus.Start()
	r := drainAll(chans...)
	var publishers sync.WaitGroup
	for p := range 2 {
		publishers.Go(func() {
			for i := range perPublisher {
				bus.Publish(newEv("a", p*perPublisher+i))
			}
		})
	}
	for i, ch := range chans[:subs/2] {
		// While the publishers publish, most likely.
		for k := 0; k < 1000 && r.counts[i].n.Load() < int64(20*i); k++ {
			runtime.Gosched()
		}
		busevents.Unsubscribe(bus, ch)
	}
	publishers.Wait()
	bus.Stop()
	r.wg.Wait()
	got := map[string]uint64{}
	for _, st := range bus.Stats().Totals {
		got[st.Name] = st.Delivered["a"]
	}
	for i := range chans {
		if read := uint64(r.counts[i].n.Load()); got[fmt.Sprint("s", i)] != read {
			t.Errorf("s%d: Delivered %d, its reader got %d", i, got[fmt.Sprint("s", i)], read)
		}
	}
}
