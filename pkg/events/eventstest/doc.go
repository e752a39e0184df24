// Package eventstest helps test code that publishes on or subscribes to the
// event bus (package busevents).
//
// # Usage
//
// A Watcher, made with the test's testing.TB, records every event of a bus
// from its creation to the end of the test. Expect waits for a sequence of
// events (by Go type with Type, by predicate with Match or a func(T) bool,
// by EventType), skipping others; ExpectExactly allows nothing in between;
// ExpectNone asserts that nothing arrives for a window. Each returns an
// error that says what was wanted and what was seen, wrapping one of the
// sentinel errors.
//
//	w := eventstest.NewWatcher(t, bus)
//	component.Start(ctx)
//	if err := eventstest.Inject(bus, &events.ConfigValidatedEvent{...}); err != nil {
//		t.Fatal(err)
//	}
//	if err := eventstest.Expect(w, eventstest.Type[*events.TemplateRenderedEvent]()); err != nil {
//		t.Fatal(err)
//	}
//
// Bubble runs a test in a testing/synctest bubble around a started bus, so
// that deadlines and windows pass in fake time and the bubble checks that
// every goroutine the test started has ended.
//
// # Concurrency properties
//
// A Watcher is read by the test goroutine alone; Inject may be called from
// any goroutine. The watcher's subscription holds up to 4096 events; if it
// overflows, every later expectation fails with ErrLost rather than pass on
// partial evidence.
package eventstest
