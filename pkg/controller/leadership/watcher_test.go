package leadership_test

import (
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// A replay reaches a subscriber that holds no state of its type once, and
// never again: neither a second replay of the same state, nor one after
// newer state was published, reaches it.
func TestReplayReachesEachSubscriberOnce(t *testing.T) {
	eventstest.Bubble(t, func(t *testing.T, bus *busevents.EventBus) {
		r := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
		w := eventstest.NewWatcher(t, bus)
		r.Cache(validated("v1"))
		if !r.Replay() {
			t.Fatal("Replay with state returned false")
		}
		isVersion := func(v string) func(*events.ConfigValidatedEvent) bool {
			return func(e *events.ConfigValidatedEvent) bool { return e.Version == v }
		}
		if err := eventstest.ExpectExactly(w, isVersion("v1")); err != nil {
			t.Fatal(err)
		}
		r.Replay()
		if err := eventstest.ExpectNone(w, time.Second); err != nil {
			t.Fatalf("second replay of the same state: %v", err)
		}
		stale := validated("v2")
		r.Cache(stale)
		bus.Publish(validated("v3")) // newer than the state cached
		r.Replay()
		if err := eventstest.ExpectExactly(w, isVersion("v3")); err != nil {
			t.Fatalf("replay after newer state: %v", err)
		}
	})
}
