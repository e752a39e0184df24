package leadership_test

import (
	"context"
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
	ch := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "late", 4, busevents.Types(events.EventTypeConfigValidated))
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
	ch := busevents.Subscribe[busevents.Event](context.Background(), bus, "all", 4)
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
	ch := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "late", versions*2+2, busevents.Types("test.state"))
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

// TestPublishCachesAndPublishes: Publish delivers the event and leaves it
// cached, stamped so that a replay does not reach the subscriber again; a
// nil event is neither cached nor published.
func TestPublishCachesAndPublishes(t *testing.T) {
	bus := eventstest.NewBus(t, 0)
	r := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus).WithLogger(nil)
	bus.Start()
	ch := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "sub", 4, busevents.Types(events.EventTypeConfigValidated))
	if n := r.Publish(nil); n != 0 || r.HasState() {
		t.Fatalf("Publish(nil) = %d, HasState %v", n, r.HasState())
	}
	if n := r.Publish(validated("v1")); n != 1 {
		t.Fatalf("Publish reached %d subscribers, want 1", n)
	}
	if e, ok := r.Get(); !ok || e.Version != "v1" {
		t.Fatalf("Get = %v, %v after Publish", e, ok)
	}
	r.Replay() // the subscriber holds v1 already: skipped
	got := eventstest.Drain(ch)
	if len(got) != 1 || got[0].(*events.ConfigValidatedEvent).Version != "v1" {
		t.Fatalf("subscriber got %v, want v1 once", got)
	}
}

// TestPublishLeavesNoSubscriberBehind is the regression test of the
// publish-then-cache order: a producer hands out its last version while a
// leader-only subscriber subscribes and replays at a random moment. With
// Publish the subscriber always ends holding the last version; with the
// event published before it is cached, a subscriber made between the two
// and replayed to before the cache ends one version behind.
func TestPublishLeavesNoSubscriberBehind(t *testing.T) {
	iterations := 3000
	if testing.Short() {
		iterations = 300
	}
	behind := 0
	for it := range iterations {
		bus := busevents.NewEventBus(0)
		r := leadership.NewStateReplayer[*versioned](bus).WithLogger(nil)
		bus.Start()
		r.Publish(&versioned{v: 1})
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			r.Publish(&versioned{v: 2})
		})
		close(start)
		for range it % 40 {
			_ = r.HasState()
		}
		ch := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "late", 8, busevents.Types("test.state"))
		r.Replay()
		wg.Wait()
		got := eventstest.Drain(ch)
		bus.Stop()
		if len(got) == 0 || got[len(got)-1].(*versioned).v != 2 {
			behind++
			t.Errorf("iteration %d: subscriber ended at %v, want version 2 last", it, vs(got))
			if behind > 5 {
				t.FailNow()
			}
		}
	}
}

// TestSubscriberMadeDuringPublishIsNotBehind places a leader-only
// subscription and its replay inside the publish of the newest version (in
// the drop callback of a full Critical subscriber, which the bus calls on the
// publishing goroutine): the moment after the bus took the event and before
// Publish returned. The new subscriber must end holding the newest version.
// Publishing before caching fails this: the replay finds the previous one.
func TestSubscriberMadeDuringPublishIsNotBehind(t *testing.T) {
	bus := eventstest.NewBus(t, 0)
	r := leadership.NewStateReplayer[*versioned](bus).WithLogger(nil)
	bus.Start()
	var late <-chan busevents.Event
	armed := false
	full := busevents.Subscribe[busevents.Event](context.Background(), bus, "full", 1, busevents.Types("test.state"), busevents.Critical(func(busevents.Drop) {
		if armed && late == nil {
			late = busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "late", 4, busevents.Types("test.state"))
			r.Replay()
		}
	}))
	r.Publish(&versioned{v: 1}) // fills "full"
	armed = true
	r.Publish(&versioned{v: 2}) // dropped by "full": the callback subscribes and replays
	if late == nil {
		t.Fatal("the drop callback did not run; the test tests nothing")
	}
	got := eventstest.Drain(late)
	if len(got) == 0 || got[len(got)-1].(*versioned).v != 2 {
		t.Fatalf("subscriber made during the publish of version 2 got %v, want it to end at 2", vs(got))
	}
	_ = full
}
