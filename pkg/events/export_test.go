package events

import "testing"

// SetRouteLeftHook makes b call hook, with b's lock held, each time routes
// leave the topic of eventType (see EventBus.routeLeft). deliver delivers
// an event to that topic as a Publish that looked the topic up before the
// routes left would, and returns how many subscribers queued it; it must
// not be used to make a Critical callback call into b.
func SetRouteLeftHook(b *EventBus, hook func(eventType string, deliver func(Event) int)) {
	b.routeLeft = func(t *topic) {
		hook(t.name, func(e Event) int { return b.deliverTo(t, e, b.seq.Load(), false) })
	}
}

// SeedsFor returns the seeds a randomized test runs (see testSeeds).
func SeedsFor(tb testing.TB, fixed ...uint64) []uint64 { return testSeeds(tb, fixed...) }
