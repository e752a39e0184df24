package events_test

import (
	"context"
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// A critical subscriber's drop callback runs with the topic's lock let go
// in the middle of a delivery; a subscription that ends then must not make
// the delivery skip, or offer twice to, the subscribers after it. Here the
// callback ends its own subscription, the first of three routes.
func TestUnsubscribeFromDropCallbackKeepsTheDeliveryWhole(t *testing.T) {
	b := eventstest.NewBus(t, 8)
	var critical <-chan busevents.Event
	dropped := 0
	ctx := context.Background()
	critical = busevents.Subscribe[busevents.Event](ctx, b, "critical", 1, busevents.Types("t"), busevents.Critical(func(busevents.Drop) {
		dropped++
		busevents.Unsubscribe(b, critical)
	}))
	second := busevents.Subscribe[busevents.Event](ctx, b, "second", 8, busevents.Types("t"))
	third := busevents.Subscribe[busevents.Event](ctx, b, "third", 8, busevents.Types("t"))
	b.Start()

	if n := b.Publish(newEv("t", 1)); n != 3 {
		t.Fatalf("first publish queued %d, want 3", n)
	}
	if n := b.Publish(newEv("t", 2)); n != 2 { // critical is full
		t.Fatalf("second publish queued %d, want 2", n)
	}
	if dropped != 1 {
		t.Fatalf("drop callback ran %d times, want 1", dropped)
	}
	for _, c := range []struct {
		name string
		ch   <-chan busevents.Event
	}{{"second", second}, {"third", third}} {
		if got := values(eventstest.Drain(c.ch)); len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Errorf("%s got %v, want [1 2]", c.name, got)
		}
	}
	if n := b.Publish(newEv("t", 3)); n != 2 {
		t.Errorf("publish after the unsubscribe queued %d, want 2", n)
	}
}

// cycleEvent routes by its Go type: its EventType needs no value.
type cycleEvent struct{ v int }

func (*cycleEvent) EventType() string    { return "cycle" }
func (*cycleEvent) Timestamp() time.Time { return time.Time{} }

// A subscriber that comes and goes, as a leader-only component does every
// term, under one name: its counters add up in Stats().Totals.
func TestTotalsOfASubscriberThatComesAndGoes(t *testing.T) {
	b := eventstest.NewBus(t, 8)
	b.Start()
	ctx, cancel := context.WithCancel(busevents.WithLeaderOnly(context.Background()))
	defer cancel()
	for range 102 {
		ch := busevents.Subscribe[*cycleEvent](ctx, b, "cycler", 4)
		b.Publish(&cycleEvent{v: 1})
		busevents.Unsubscribe(b, ch)
	}
	var total *busevents.SubscriberStats
	for _, st := range b.Stats().Totals {
		if st.Name == "cycler" {
			total = &st
		}
	}
	if total == nil {
		t.Fatal("no totals for the cycling subscriber")
	}
	var delivered uint64
	for _, n := range total.Delivered {
		delivered += n
	}
	if delivered != 102 {
		t.Errorf("totals count %d deliveries, want 102 (%+v)", delivered, total.Delivered)
	}
}
