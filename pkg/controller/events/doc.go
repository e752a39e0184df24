// Package events is the reference controller's domain event catalog: the
// state, trigger and render events the reference components exchange over
// the generic bus of pkg/events, and, re-exported under their historical
// names, the core's leadership events (defined in pkg/controller/leadership)
// and lifecycle events (defined in pkg/controller/lifecycle).
//
// # Layers
//
// This package is on the reference side: its state events carry the
// reference controller's configuration (pkg/controller/config). The core
// never imports it. The leadership and lifecycle names here are type aliases
// and forwarding constructors, so events.BecameLeaderEvent and
// leadership.BecameLeaderEvent are the same type and a subscriber may use
// either.
//
// # Conventions
//
// Every event is a pointer to a struct, created by its New... constructor,
// which stamps the time. EventType returns a stable dot-notation name, one of
// the constants below, and works on a nil pointer, so that
// busevents.Subscribe[*ConfigValidatedEvent] can route by it. Events are
// shared by all subscribers and must not be modified after publication.
package events
