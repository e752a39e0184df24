package events_test

import (
	"slices"
	"testing"
	"testing/synctest"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// Events published before Start: held, dropped when the capacity is
// reached, and delivered in order by Start.

// Before Start, a full holding buffer keeps the newest state of a
// LatestValue type at the expense of other events (it once dropped the
// incoming event, and the newest state was lost).
func TestPreStartOverflowKeepsNewestLatestValueState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := eventstest.NewBus(t, 4)
		ch := subscribe(b, "state", 64, busevents.Types("config", "noise"), busevents.LatestValue("config"))
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

// A Republish made while Start delivers the held events is delivered (it
// once found the bus not yet started and was dropped without a trace).
func TestRepublishDuringStartIsDelivered(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	state := newEv("config", 7)
	seq := b.NextSequence()
	republished := -1
	// The drop callback of "trigger" runs on Start's goroutine while Start
	// delivers the held events (its buffer of 1 overflows on the second
	// tick), and republishes state, as a replayer reacting to an event
	// would.
	subscribe(b, "trigger", 1, busevents.Types("tick"), busevents.Critical(func(busevents.Drop) {
		if republished < 0 {
			republished = b.Republish(state, seq)
		}
	}))
	late := subscribe(b, "state", 4, busevents.Types("config"))
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
	early := subscribe(b, "early", 4, busevents.Types("config"))
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

// A subscriber of every type that declares one LatestValue gets the newest
// state held before Start too.
func TestPreStartOverflowLatestValueOfUniversalSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := eventstest.NewBus(t, 2)
		ch := subscribe(b, "all", 16, busevents.LatestValue("config"))
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
