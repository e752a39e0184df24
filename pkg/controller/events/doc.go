// Package events is the controller's domain event catalog: the leadership
// events produced by pkg/controller/leaderelection and the state, trigger
// and render events the reference components exchange over the generic bus
// of pkg/events.
//
// # Conventions
//
// Every event is a pointer to a struct, created by its New... constructor,
// which stamps the time. EventType returns a stable dot-notation name, one of
// the constants below, and works on a nil pointer, so that
// busevents.Subscribe[*ConfigValidatedEvent] can route by it. Events are
// shared by all subscribers and must not be modified after publication.
package events
