package leadership_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func validated(version string) *events.ConfigValidatedEvent {
	return events.NewConfigValidatedEvent(nil, version, "test")
}

func TestCacheGetReplay(t *testing.T) {
	bus := eventstest.NewBus(t, 0)
	r := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
	bus.Start()
	if r.HasState() || r.Replay() {
		t.Fatal("empty replayer claims state")
	}
	if e, ok := r.Get(); ok || e != nil {
		t.Fatalf("Get on empty replayer = %v, %v", e, ok)
	}
	r.Cache(validated("v1"))
	r.Cache(validated("v2"))
	if e, ok := r.Get(); !ok || e.Version != "v2" || !r.HasState() {
		t.Fatalf("Get = %v, %v; want v2", e, ok)
	}
	ch := bus.SubscribeLeaderOnly("late", 4, []string{events.EventTypeConfigValidated})
	if !r.Replay() {
		t.Fatal("Replay with state returned false")
	}
	got := eventstest.Drain(ch)
	if len(got) != 1 || got[0].(*events.ConfigValidatedEvent).Version != "v2" {
		t.Fatalf("late subscriber got %v, want only v2", got)
	}
}

func TestNilBusPanicsNamingIt(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "bus is nil") {
			t.Fatalf("recovered %v, want a panic naming the nil bus", r)
		}
	}()
	leadership.NewStateReplayer[*events.ConfigValidatedEvent](nil)
}

func TestNilAndTypedNilEventsAreNotCached(t *testing.T) {
	bus := eventstest.NewBus(t, 0)
	r := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
	ri := leadership.NewStateReplayer[busevents.Event](bus)
	bus.Start()
	ch := bus.Subscribe("all", 4)
	r.Cache(nil)
	ri.Cache(nil)
	var typedNil *events.ConfigValidatedEvent
	ri.Cache(typedNil)
	if r.HasState() || ri.HasState() || r.Replay() || ri.Replay() {
		t.Fatal("a nil event was cached")
	}
	r.Cache(validated("v1"))
	r.Cache(nil)
	if e, _ := r.Get(); e == nil || e.Version != "v1" {
		t.Fatalf("a nil Cache replaced the held state: %v", e)
	}
	if got := eventstest.Drain(ch); len(got) != 0 {
		t.Fatalf("nil events delivered: %v", got)
	}
}

// versioned is a state event whose payload is a version number.
type versioned struct{ v int }

func (*versioned) EventType() string    { return "test.state" }
func (*versioned) Timestamp() time.Time { return time.Time{} }

// TestReplayNeverGoesBackwards runs a producer that publishes and caches
// increasing versions (in both orders) against a late subscriber whose
// replay races the producer. The subscriber's versions must never go
// backwards, and it must end up at least at the version cached when Replay
// was called.
func TestReplayNeverGoesBackwards(t *testing.T) {
	iterations := 2000
	if testing.Short() {
		iterations = 200
	}
	for _, cacheFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("cacheFirst=%v", cacheFirst), func(t *testing.T) {
			for it := range iterations {
				replayRace(t, it, cacheFirst)
			}
		})
	}
}

func replayRace(t *testing.T, it int, cacheFirst bool) {
	bus := busevents.NewEventBus(0)
	defer bus.Stop()
	r := leadership.NewStateReplayer[*versioned](bus)
	bus.Start()
	const versions = 60
	produce := func(v int) {
		e := &versioned{v: v}
		if cacheFirst {
			r.Cache(e)
			bus.Publish(e)
		} else {
			bus.Publish(e)
			r.Cache(e)
		}
	}
	produce(1)
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() {
		<-start
		for v := 2; v <= versions; v++ {
			produce(v)
		}
	})
	<-time.After(0)
	ch := bus.SubscribeLeaderOnly("late", versions*2+2, []string{"test.state"})
	close(start)
	// Let the producer get a head start of a varying length.
	for range it % 50 {
		_ = r.HasState()
	}
	atReplay, _ := r.Get()
	r.Replay()
	wg.Wait()
	got := eventstest.Drain(ch)
	last := 0
	for i, e := range got {
		v := e.(*versioned).v
		if v < last {
			t.Fatalf("iteration %d: version %d after %d (position %d of %v)", it, v, last, i, vs(got))
		}
		last = v
	}
	if last < atReplay.v {
		t.Fatalf("iteration %d: ended at version %d, older than %d cached at Replay", it, last, atReplay.v)
	}
	if last != versions {
		t.Fatalf("iteration %d: ended at version %d, want %d", it, last, versions)
	}
}

func vs(evs []busevents.Event) []int {
	var out []int
	for _, e := range evs {
		out = append(out, e.(*versioned).v)
	}
	return out
}

func TestConcurrentCacheKeepsLatestStamp(t *testing.T) {
	bus := eventstest.NewBus(t, 0)
	r := leadership.NewStateReplayer[*versioned](bus)
	bus.Start()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				r.Cache(&versioned{v: w*1000 + i})
				_, _ = r.Get()
			}
		})
	}
	wg.Wait()
	final := &versioned{v: -1}
	r.Cache(final)
	if e, _ := r.Get(); e != final {
		t.Fatalf("Get = %v after the last Cache, want it", e)
	}
}
