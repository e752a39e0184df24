package leadership_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// rwSlot is the baseline: the seed's single slot behind a sync.RWMutex.
type rwSlot struct {
	mu    sync.RWMutex
	event *events.ConfigValidatedEvent
}

func (s *rwSlot) set(e *events.ConfigValidatedEvent) { s.mu.Lock(); s.event = e; s.mu.Unlock() }
func (s *rwSlot) get() (*events.ConfigValidatedEvent, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.event, s.event != nil
}

func newStarted(b *testing.B) *busevents.EventBus {
	bus := busevents.NewEventBus(0)
	bus.Start()
	b.Cleanup(bus.Stop)
	return bus
}

func BenchmarkCache(b *testing.B) {
	b.Run("replayer", func(b *testing.B) {
		r := leadership.NewStateReplayer[*events.ConfigValidatedEvent](newStarted(b))
		e := validated("v")
		b.ReportAllocs()
		for b.Loop() {
			r.Cache(e)
		}
	})
	b.Run("rwmutex", func(b *testing.B) {
		var s rwSlot
		e := validated("v")
		b.ReportAllocs()
		for b.Loop() {
			s.set(e)
		}
	})
}

// BenchmarkGetWithWriter reads in parallel while another goroutine keeps
// caching new state.
func BenchmarkGetWithWriter(b *testing.B) {
	run := func(b *testing.B, set func(*events.ConfigValidatedEvent), get func() (*events.ConfigValidatedEvent, bool)) {
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			e := validated("v")
			for !stop.Load() {
				set(e)
			}
		})
		set(validated("v0"))
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := get(); !ok {
					b.Error("no state")
				}
			}
		})
		b.StopTimer()
		stop.Store(true)
		wg.Wait()
	}
	b.Run("replayer", func(b *testing.B) {
		r := leadership.NewStateReplayer[*events.ConfigValidatedEvent](newStarted(b))
		run(b, r.Cache, r.Get)
	})
	b.Run("rwmutex", func(b *testing.B) {
		var s rwSlot
		run(b, s.set, s.get)
	})
}

// BenchmarkReplay replays to one late subscriber that already holds the
// state (the common second replay) and, as a baseline, publishes the same
// event to it.
func BenchmarkReplay(b *testing.B) {
	b.Run("replayer", func(b *testing.B) {
		bus := newStarted(b)
		r := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus).WithLogger(nil)
		busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "late", 1, busevents.Types(events.EventTypeConfigValidated))
		r.Cache(validated("v"))
		r.Replay()
		b.ReportAllocs()
		for b.Loop() {
			r.Replay()
		}
	})
	b.Run("publish", func(b *testing.B) {
		bus := newStarted(b)
		busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "late", 1, busevents.Types(events.EventTypeConfigValidated))
		e := validated("v")
		bus.Publish(e)
		b.ReportAllocs()
		for b.Loop() {
			bus.Publish(e)
		}
	})
}
