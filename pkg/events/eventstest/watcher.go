package eventstest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// Errors returned by Expect, ExpectExactly and ExpectNone, wrapped with the
// detail; test them with errors.Is.
var (
	// ErrTimeout means the events wanted did not all arrive in time.
	ErrTimeout = errors.New("eventstest: timed out")
	// ErrUnexpected means an event arrived that the expectation excludes.
	ErrUnexpected = errors.New("eventstest: unexpected event")
	// ErrLost means the watcher's buffer overflowed, so what it saw is
	// not everything that was published.
	ErrLost = errors.New("eventstest: watcher lost events")
	// ErrClosed means the bus stopped while events were still wanted.
	ErrClosed = errors.New("eventstest: bus stopped")
	// ErrBadWant means an argument to Expect is not a matcher.
	ErrBadWant = errors.New("eventstest: invalid expectation")
)

func errorf(format string, args ...any) error { return fmt.Errorf("eventstest: "+format, args...) }

// DefaultTimeout is how long Expect and ExpectExactly wait unless
// WithTimeout says otherwise. Inside a synctest bubble it is fake time.
const DefaultTimeout = 5 * time.Second

// watcherBuffer is the number of events a watcher holds before it loses
// some; a lost event makes every later expectation fail with ErrLost.
const watcherBuffer = 4096

// Watcher records, in order, every event published on a bus after it was
// made, for Expect, ExpectExactly and ExpectNone. Its subscription ends
// with the test. A Watcher is used by one goroutine, the test's.
type Watcher struct {
	tb      testing.TB
	ch      <-chan busevents.Event
	timeout time.Duration
	lost    atomic.Uint64
	seen    []string // types consumed so far, for error messages
}

// WatcherOption configures a Watcher.
type WatcherOption func(*Watcher)

// WithTimeout sets how long each Expect and ExpectExactly waits.
func WithTimeout(d time.Duration) WatcherOption {
	return func(w *Watcher) { w.timeout = d }
}

// NewWatcher subscribes to every event of bus, started or not, until the
// test ends. It is a leader-only subscription, so making it after Start is
// not warned about.
func NewWatcher(tb testing.TB, bus *busevents.EventBus, opts ...WatcherOption) *Watcher {
	tb.Helper()
	w := &Watcher{tb: tb, timeout: DefaultTimeout}
	for _, o := range opts {
		o(w)
	}
	if w.timeout <= 0 {
		tb.Fatalf("eventstest: watcher timeout %s is not positive", w.timeout)
	}
	ctx, cancel := context.WithCancel(busevents.WithLeaderOnly(context.Background()))
	tb.Cleanup(cancel)
	w.ch = busevents.Subscribe[busevents.Event](ctx, bus, "eventstest.watcher", watcherBuffer,
		busevents.Critical(func(busevents.Drop) { w.lost.Add(1) }))
	return w
}

// Matcher matches one event. Type, Match and EventType make one; Expect
// also takes a func(T) bool, func(T) error or func(T) for an event type T.
type Matcher struct {
	desc  string
	match func(busevents.Event) (bool, error)
}

func (m Matcher) String() string { return m.desc }

// Type matches any event of Go type T.
func Type[T busevents.Event]() Matcher {
	return Matcher{desc: typeName[T](), match: func(e busevents.Event) (bool, error) {
		_, ok := e.(T)
		return ok, nil
	}}
}

// Match matches an event of Go type T for which pred returns true.
func Match[T busevents.Event](pred func(T) bool) Matcher {
	return Matcher{desc: typeName[T]() + " matching a predicate", match: func(e busevents.Event) (bool, error) {
		v, ok := e.(T)
		return ok && pred(v), nil
	}}
}

// EventType matches any event whose EventType is name.
func EventType(name string) Matcher {
	return Matcher{desc: fmt.Sprintf("event type %q", name), match: func(e busevents.Event) (bool, error) {
		return e.EventType() == name, nil
	}}
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// Expect waits for events matching want, in that order, skipping the
// events in between, until all matched or the watcher's timeout passed. A
// matcher that is a func(T) error fails the expectation with its error.
// The events consumed are gone for the next expectation.
func Expect(w *Watcher, want ...any) error {
	w.tb.Helper()
	return w.expect(false, want)
}

// ExpectExactly is Expect with nothing in between: each event received
// must match the next of want, and when all matched, no further event may
// be waiting.
func ExpectExactly(w *Watcher, want ...any) error {
	w.tb.Helper()
	if err := w.expect(true, want); err != nil {
		return err
	}
	select {
	case e, ok := <-w.ch:
		if ok {
			return fmt.Errorf("%w: %s after the %d expected", ErrUnexpected, describe(e), len(want))
		}
	default:
	}
	return nil
}

// ExpectNone waits for window and fails if any event arrives meanwhile.
func ExpectNone(w *Watcher, window time.Duration) error {
	timer := time.NewTimer(window)
	defer timer.Stop()
	select {
	case e, ok := <-w.ch:
		if !ok {
			return nil
		}
		return fmt.Errorf("%w: %s within %s", ErrUnexpected, describe(e), window)
	case <-timer.C:
		return w.checkLost()
	}
}

func (w *Watcher) expect(exact bool, want []any) error {
	ms := make([]Matcher, len(want))
	for i, x := range want {
		m, err := toMatcher(x)
		if err != nil {
			return fmt.Errorf("want %d: %w", i, err)
		}
		ms[i] = m
	}
	timer := time.NewTimer(w.timeout)
	defer timer.Stop()
	for i := 0; i < len(ms); {
		select {
		case e, ok := <-w.ch:
			if !ok {
				return fmt.Errorf("%w: still waiting for %s (%d of %d)", ErrClosed, ms[i], i+1, len(ms))
			}
			w.seen = append(w.seen, e.EventType())
			matched, err := ms[i].match(e)
			switch {
			case err != nil:
				return fmt.Errorf("eventstest: %s: %w", describe(e), err)
			case matched:
				i++
			case exact:
				return fmt.Errorf("%w: %s, want %s (%d of %d)", ErrUnexpected, describe(e), ms[i], i+1, len(ms))
			}
		case <-timer.C:
			return fmt.Errorf("%w after %s waiting for %s (%d of %d); event types seen: [%s]",
				ErrTimeout, w.timeout, ms[i], i+1, len(ms), strings.Join(w.seen, " "))
		}
	}
	return w.checkLost()
}

func (w *Watcher) checkLost() error {
	if n := w.lost.Load(); n > 0 {
		return fmt.Errorf("%w: %d (more than %d waiting)", ErrLost, n, watcherBuffer)
	}
	return nil
}

func describe(e busevents.Event) string {
	return fmt.Sprintf("%T (%s)", e, e.EventType())
}

var (
	eventIface = reflect.TypeFor[busevents.Event]()
	boolType   = reflect.TypeFor[bool]()
	errorType  = reflect.TypeFor[error]()
)

// toMatcher turns a Matcher, func(T) bool, func(T) error or func(T) into
// a Matcher.
func toMatcher(x any) (Matcher, error) {
	if m, ok := x.(Matcher); ok {
		return m, nil
	}
	if x == nil {
		return Matcher{}, fmt.Errorf("%w: nil", ErrBadWant)
	}
	fv := reflect.ValueOf(x)
	ft := fv.Type()
	if ft.Kind() != reflect.Func || ft.NumIn() != 1 || !ft.In(0).Implements(eventIface) || ft.NumOut() > 1 ||
		ft.NumOut() == 1 && ft.Out(0) != boolType && ft.Out(0) != errorType {
		return Matcher{}, fmt.Errorf("%w: %T is not a Matcher, func(T) bool, func(T) error or func(T)", ErrBadWant, x)
	}
	in := ft.In(0)
	return Matcher{desc: in.String(), match: func(e busevents.Event) (bool, error) {
		v := reflect.ValueOf(e)
		if !v.Type().AssignableTo(in) {
			return false, nil
		}
		out := fv.Call([]reflect.Value{v})
		switch {
		case len(out) == 0:
			return true, nil
		case ft.Out(0) == boolType:
			return out[0].Bool(), nil
		case out[0].IsNil():
			return true, nil
		default:
			return false, out[0].Interface().(error)
		}
	}}, nil
}
