package events

import "reflect"

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

// ScopeKeeps reports whether ch, a channel Subscribe returned, is the
// channel of a subscription s keeps in its current period (see Scope).
func ScopeKeeps(s *Scope, ch any) bool {
	p := reflect.ValueOf(ch).Pointer()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.live {
		if reflect.ValueOf(k).Elem().FieldByName("key").Pointer() == p {
			return true
		}
	}
	return false
}

// ForgetNilShapes empties the cache of IsNil (see nilShapes), so that a
// test sees each type's first IsNil again.
func ForgetNilShapes() {
	for i := range nilShapes {
		nilShapes[i].Store(0)
	}
}
