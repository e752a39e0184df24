package events_test

import (
	"context"
	"fmt"
	"testing"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// The publish benchmarks measure the publishing goroutine alone: every
// benchBuffer iterations the timer stops and the subscriber channels are
// emptied on the same goroutine, so no event is dropped and no reader on
// another core competes for the CPU or the channel. The baseline does the
// same around a bare send.
const benchBuffer = 1 << 16

// drainEvery empties chans, off the clock, once every benchBuffer iterations.
func drainEvery[T any](b *testing.B, i int, chans ...<-chan T) {
	if i%benchBuffer != benchBuffer-1 {
		return
	}
	b.StopTimer()
	for _, ch := range chans {
		eventstest.Drain(ch)
	}
	b.StartTimer()
}

// BenchmarkBaselineChannelSend is the physical floor: a non-blocking send of
// a pointer event on a buffered channel.
func BenchmarkBaselineChannelSend(b *testing.B) {
	ch := make(chan busevents.Event, benchBuffer)
	e := busevents.Event(newEv("a", 1))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		select {
		case ch <- e:
		default:
		}
		drainEvery(b, i, (<-chan busevents.Event)(ch))
	}
}

func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			bus := busevents.NewEventBus(0)
			var chans []<-chan busevents.Event
			for i := range n {
				chans = append(chans, bus.SubscribeTypes(fmt.Sprint("s", i), benchBuffer, []string{"a"}))
			}
			bus.Start()
			e := newEv("a", 1)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				bus.Publish(e)
				drainEvery(b, i, chans...)
			}
			bus.Stop()
		})
	}
}

// BenchmarkPublishOneOfFiftyTypes has 50 subscribers on 50 distinct types and
// publishes one type: the cost should be that of one subscriber.
func BenchmarkPublishOneOfFiftyTypes(b *testing.B) {
	bus := busevents.NewEventBus(0)
	var chans []<-chan busevents.Event
	for i := range 50 {
		chans = append(chans, bus.SubscribeTypes(fmt.Sprint("s", i), benchBuffer, []string{fmt.Sprint("t", i)}))
	}
	bus.Start()
	e := newEv("t17", 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bus.Publish(e)
		drainEvery(b, i, chans[17])
	}
	bus.Stop()
}

// BenchmarkPublishNoReader publishes to a subscriber that never reads: the
// drop path.
func BenchmarkPublishNoReader(b *testing.B) {
	bus := busevents.NewEventBus(0)
	bus.SubscribeTypes("never-reads", 16, []string{"a"})
	bus.Start()
	e := newEv("a", 1)
	b.ReportAllocs()
	for b.Loop() {
		bus.Publish(e)
	}
	bus.Stop()
}

func BenchmarkPublishGenericSubscriber(b *testing.B) {
	bus := busevents.NewEventBus(0)
	ctx, cancel := context.WithCancel(context.Background())
	ch := busevents.Subscribe[*eventstest.Event](ctx, bus, "typed", benchBuffer)
	bus.Start()
	e := newEv("a", 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bus.Publish(e)
		drainEvery(b, i, ch)
	}
	cancel()
	bus.Stop()
}
