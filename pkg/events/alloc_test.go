package events_test

import (
	"fmt"
	"testing"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// Evicting from a full LatestValue buffer allocates nothing (it once built
// a slice and a map per publish).
func TestLatestValueEvictionAtFullBufferDoesNotAllocate(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	// Never read: every publish below finds the buffer full.
	subscribe(b, "never-reads", 4, busevents.Types("config", "pods", "noise"), busevents.LatestValue("config", "pods"))
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

// A publish allocates nothing, whichever of many event types it is of,
// also when every subscriber's buffer is full.
func TestPublishOfManyTypesDoesNotAllocate(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	var types []string
	var evs []*ev
	for i := range 200 {
		types = append(types, fmt.Sprint("type-", i))
		evs = append(evs, newEv(types[i], i))
	}
	subscribe(b, "sink", 1, busevents.Types(types[0], types[1:]...)) // never read: publishes count drops
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
