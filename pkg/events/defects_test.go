package events_test

// Regression tests for the defects of the bus listed in issue 10 (4, 5, 6
// and 8). They use only the API the bus had before the fixes, so that they
// can be run against it, and each failed there.

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// Defect 4: before Start, a full holding buffer dropped the incoming event
// even when its type is delivered latest-value, so the newest state was lost.
func TestPreStartOverflowKeepsNewestLatestValueState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := eventstest.NewBus(t, 4)
		ch := b.SubscribeTypes("state", 64, []string{"config", "noise"}, busevents.LatestValue("config"))
		published := map[string]int{}
		publish := func(typ string, v int) {
			b.Publish(newEv(typ, v))
			published[typ]++
		}
		for i := 1; i <= 20; i++ {
			publish("noise", i)
			publish("config", 100+i)
		}
		// The buffer is full of config versions and noise; the newest
		// config must still win over held noise.
		for i := 21; i <= 30; i++ {
			publish("noise", i)
		}
		publish("config", 999)
		b.Start()
		got := drainSettled(ch)
		received := map[string]int{}
		lastConfig := 0
		for _, e := range got {
			received[e.EventType()]++
			if e.EventType() == "config" {
				lastConfig = e.(*ev).Value
			}
		}
		if lastConfig != 999 {
			t.Fatalf("newest config held before Start lost: last config delivered %d, got %v", lastConfig, values(got))
		}
		checkAccounting(t, b, published, received)
	})
}

// checkAccounting checks that every event published is either received
// or counted: held and dropped before Start, refused by a full buffer, lost
// or skipped from it.
func checkAccounting(t *testing.T, b *busevents.EventBus, published, received map[string]int) {
	t.Helper()
	st := b.Stats()
	var sub busevents.SubscriberStats
	if len(st.Subscribers) == 1 {
		sub = st.Subscribers[0]
	}
	for typ, n := range published {
		counted := received[typ] + int(st.PreStartDropped[typ]+sub.Dropped[typ]+sub.Skipped[typ])
		if counted != n {
			t.Errorf("type %s: published %d, received %d + dropped before start %d + dropped %d + skipped %d = %d",
				typ, n, received[typ], st.PreStartDropped[typ], sub.Dropped[typ], sub.Skipped[typ], counted)
		}
	}
}

// Defect 5: a Republish made while Start delivered the held events found
// the bus not yet started and was dropped without a trace.
func TestRepublishDuringStartIsDelivered(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	state := newEv("config", 7)
	seq := b.NextSequence()
	republished := -1
	// The drop callback of "trigger" runs on Start's goroutine while Start
	// delivers the held events (its buffer of 1 overflows on the second
	// tick), and republishes state, as a replayer reacting to an event
	// would.
	b.SubscribeTypes("trigger", 1, []string{"tick"}, busevents.Critical(func(busevents.Drop) {
		if republished < 0 {
			republished = b.Republish(state, seq)
		}
	}))
	late := b.SubscribeTypes("state", 4, []string{"config"})
	b.Publish(newEv("tick", 1))
	b.Publish(newEv("tick", 2))
	b.Start()
	if republished < 0 {
		t.Fatal("the drop callback did not run during Start")
	}
	if got := values(eventstest.Drain(late)); !slices.Equal(got, []int{7}) {
		st := b.Stats()
		t.Fatalf("republished during Start: subscriber got %v, want [7] (counted: pre-start dropped %v, rejected %d)",
			got, st.PreStartDropped, st.RejectedStopped)
	}
}

// A Republish before Start is held like a Publish and delivered by Start,
// with the replay check: a subscriber given newer state meanwhile skips it.
func TestRepublishBeforeStartIsHeld(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	early := b.SubscribeTypes("early", 4, []string{"config"})
	old := newEv("config", 1)
	oldSeq := b.NextSequence()
	if n := b.Republish(old, oldSeq); n != 0 {
		t.Fatalf("Republish before Start returned %d, want 0", n)
	}
	b.Publish(newEv("config", 2))
	b.Republish(old, oldSeq) // held after newer state: must be skipped
	b.Start()
	if got := values(eventstest.Drain(early)); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("got %v, want the held replay then the newer state, and not the replay again", got)
	}
	b.Stop()
	if n := b.Republish(old, b.NextSequence()); n != 0 || b.Stats().RejectedStopped != 1 {
		t.Fatalf("Republish after Stop: %d, RejectedStopped %d; want 0 and 1", n, b.Stats().RejectedStopped)
	}
}

// Event values of every kind, for IsNil (defect 6).
type (
	ptrField   struct{ p *int }
	twoFields  struct{ p, q *int }
	emptyEvent struct{}
	intEvent   int
	strEvent   string
	mapEvent   map[string]int
	funcEvent  func()
	chanEvent  chan int
	sliceEvent []int
	arrayEvent [1]*int
)

func (ptrField) EventType() string      { return "ptr-field" }
func (twoFields) EventType() string     { return "two-fields" }
func (emptyEvent) EventType() string    { return "empty" }
func (intEvent) EventType() string      { return "int" }
func (strEvent) EventType() string      { return "str" }
func (mapEvent) EventType() string      { return "map" }
func (funcEvent) EventType() string     { return "func" }
func (chanEvent) EventType() string     { return "chan" }
func (sliceEvent) EventType() string    { return "slice" }
func (arrayEvent) EventType() string    { return "array" }
func (*ptrField) Timestamp() time.Time  { return time.Time{} }
func (twoFields) Timestamp() time.Time  { return time.Time{} }
func (emptyEvent) Timestamp() time.Time { return time.Time{} }
func (intEvent) Timestamp() time.Time   { return time.Time{} }
func (strEvent) Timestamp() time.Time   { return time.Time{} }
func (mapEvent) Timestamp() time.Time   { return time.Time{} }
func (funcEvent) Timestamp() time.Time  { return time.Time{} }
func (chanEvent) Timestamp() time.Time  { return time.Time{} }
func (sliceEvent) Timestamp() time.Time { return time.Time{} }
func (arrayEvent) Timestamp() time.Time { return time.Time{} }

// valueEvent is a struct whose single field is a pointer, with value
// methods: the value itself is the event.
type valueEvent struct{ p *int }

func (valueEvent) EventType() string    { return "value" }
func (valueEvent) Timestamp() time.Time { return time.Time{} }

// Defect 6: IsNil took the data word of the interface for the value, so a
// struct whose only field is a nil pointer (stored directly in the word)
// was called nil and refused by the bus.
func TestIsNilEveryKind(t *testing.T) {
	x := 1
	cases := []struct {
		name string
		e    busevents.Event
		nil  bool
	}{
		{"nil interface", nil, true},
		{"typed nil pointer", (*ev)(nil), true},
		{"typed nil pointer to struct with value methods", (*stateEvent)(nil), true},
		{"pointer", newEv("a", 1), false},
		{"struct with single nil pointer field", valueEvent{}, false},
		{"struct with single non-nil pointer field", valueEvent{p: &x}, false},
		{"pointer to struct with nil field", &ptrField{}, false},
		{"struct with two nil pointer fields", twoFields{}, false},
		{"array of one nil pointer", arrayEvent{}, false},
		{"empty struct", emptyEvent{}, false},
		{"struct", stateEvent{v: 1}, false},
		{"zero int", intEvent(0), false},
		{"empty string", strEvent(""), false},
		{"nil map", mapEvent(nil), true},
		{"map", mapEvent{}, false},
		{"nil func", funcEvent(nil), true},
		{"func", funcEvent(func() {}), false},
		{"nil chan", chanEvent(nil), true},
		{"chan", make(chanEvent), false},
		{"nil slice", sliceEvent(nil), true},
		{"empty slice", sliceEvent{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := busevents.IsNil(c.e); got != c.nil {
				t.Fatalf("IsNil(%#v) = %v, want %v", c.e, got, c.nil)
			}
			// The bus agrees: it delivers exactly the events that are not nil.
			b := eventstest.NewBus(t, 0)
			ch := b.Subscribe("all", 1)
			b.Start()
			want := 1
			if c.nil {
				want = 0
			}
			if n := b.Publish(c.e); n != want || len(eventstest.Drain(ch)) != want {
				t.Fatalf("Publish(%#v) reached %d, want %d", c.e, n, want)
			}
		})
	}
}

// Defect 8: evicting from a full LatestValue buffer built a slice and a map
// per publish.
func TestLatestValueEvictionAtFullBufferDoesNotAllocate(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	// Never read: every publish below finds the buffer full.
	b.SubscribeTypes("never-reads", 4, []string{"config", "pods", "noise"}, busevents.LatestValue("config", "pods"))
	b.Start()
	evs := []*ev{newEv("noise", 0), newEv("config", 1), newEv("pods", 2)}
	for range 64 {
		for _, e := range evs {
			b.Publish(e)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, e := range evs {
			b.Publish(e)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round of publishes at a full LatestValue buffer, want 0", allocs)
	}
	st := b.Stats().Subscribers[0]
	if st.Skipped["config"] == 0 || st.Dropped["noise"] == 0 || st.Dropped["config"] != 0 {
		t.Fatalf("the publishes did not exercise eviction: %+v", st)
	}
}

// Defect 8: the topic lookup cache replaced a colliding entry with a new
// allocation on every miss, so two types sharing a slot allocated on every
// publish.
func TestTopicCacheCollisionsDoNotAllocate(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	// 200 types in a 64-slot cache: many share a slot.
	var types []string
	var evs []*ev
	for i := range 200 {
		types = append(types, fmt.Sprint("type-", i))
		evs = append(evs, newEv(types[i], i))
	}
	b.SubscribeTypes("sink", 1, types) // never read: publishes count drops
	b.Start()
	for _, e := range evs {
		b.Publish(e)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, e := range evs {
			b.Publish(e)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round of 200 publishes, want 0", allocs)
	}
}

// A subscriber of every type that declares one LatestValue gets the newest
// state held before Start too.
func TestPreStartOverflowLatestValueOfUniversalSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := eventstest.NewBus(t, 2)
		ch := b.Subscribe("all", 16, busevents.LatestValue("config"))
		for i := 1; i <= 5; i++ {
			b.Publish(newEv("config", i))
		}
		b.Start()
		got := values(drainSettled(ch))
		if len(got) == 0 || got[len(got)-1] != 5 {
			t.Fatalf("got %v, want the newest config (5) last", got)
		}
		if n := b.Stats().PreStartDropped["config"]; int(n)+len(got) != 5 {
			t.Fatalf("received %d, dropped before start %d: not all 5 accounted for", len(got), n)
		}
	})
}
