package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// logRecorder is a slog.Handler that keeps "LEVEL message" lines.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// count returns how many lines contain every one of parts.
func (r *logRecorder) count(parts ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
outer:
	for _, l := range r.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue outer
			}
		}
		n++
	}
	return n
}

// holder is a leader-only test component that subscribes in Start, records
// what it receives per term and reports HoldsState.
type holder struct {
	name     string
	bus      *busevents.EventBus
	types    []string // subscribed to
	required []string // RequiredState
	// subscribeDelay, if set, says how long to wait before subscribing.
	subscribeDelay func(term uint64) time.Duration
	// stopDelay is how long Start keeps running after its ctx ended.
	stopDelay time.Duration
	// fail, if set, is returned right after subscribing.
	fail func(term uint64) error
	// noHold suppresses HoldsState.
	noHold atomic.Bool

	mu         sync.Mutex
	terms      []uint64
	got        map[uint64][]busevents.Event
	running    int
	maxRunning int
	ctxs       []context.Context
}

func newHolder(bus *busevents.EventBus, name string, types ...string) *holder {
	return &holder{name: name, bus: bus, types: types, required: types, got: map[uint64][]busevents.Event{}}
}

func (h *holder) Name() string            { return h.name }
func (h *holder) RequiredState() []string { return h.required }

func (h *holder) Start(ctx context.Context) error {
	term, _ := lifecycle.TermFromContext(ctx)
	h.mu.Lock()
	h.running++
	h.maxRunning = max(h.maxRunning, h.running)
	h.terms = append(h.terms, term)
	h.got[term] = nil // per-term state reset
	h.ctxs = append(h.ctxs, ctx)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()

	if h.subscribeDelay != nil {
		if d := h.subscribeDelay(term); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	var ch <-chan busevents.Event
	if len(h.types) == 0 {
		ch = busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), h.bus, h.name, 16)
	} else {
		ch = busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), h.bus, h.name, 16, busevents.Types(h.types[0], h.types[1:]...))
	}
	defer busevents.Unsubscribe(h.bus, ch)
	lifecycle.Subscribed(ctx)
	if h.fail != nil {
		if err := h.fail(term); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			if h.stopDelay > 0 {
				time.Sleep(h.stopDelay)
			}
			return ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				ch = nil // the term ended: ctx is done too
				continue
			}
			h.mu.Lock()
			h.got[term] = append(h.got[term], ev)
			h.mu.Unlock()
			if !h.noHold.Load() {
				lifecycle.HoldsState(ctx, ev.EventType())
			}
		}
	}
}

// received returns the events received in term, in order.
func (h *holder) received(term uint64) []busevents.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]busevents.Event(nil), h.got[term]...)
}

// lastConfig returns the version of the last ConfigValidatedEvent received in term.
func (h *holder) lastConfig(term uint64) string {
	v := ""
	for _, ev := range h.received(term) {
		if c, ok := ev.(*events.ConfigValidatedEvent); ok {
			v = c.Version
		}
	}
	return v
}

func (h *holder) startedTerms() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.terms...)
}

// allReplica is an all-replica test component.
type allReplica struct {
	name    string
	failAt  time.Duration // if > 0, fail after this long
	err     error
	started atomic.Int32
	ctxTerm atomic.Bool // TermFromContext reported ok
}

func (a *allReplica) Name() string { return a.name }

func (a *allReplica) Start(ctx context.Context) error {
	a.started.Add(1)
	_, ok := lifecycle.TermFromContext(ctx)
	a.ctxTerm.Store(ok)
	lifecycle.Subscribed(ctx) // no-op outside a term
	if a.failAt > 0 {
		select {
		case <-time.After(a.failAt):
			return a.err
		case <-ctx.Done():
			return nil
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// funcComponent runs fn as Start.
type funcComponent struct {
	name string
	fn   func(ctx context.Context) error
}

func (f funcComponent) Name() string                    { return f.name }
func (f funcComponent) Start(ctx context.Context) error { return f.fn(ctx) }

// harness runs a Manager on a real bus.
type harness struct {
	t       *testing.T
	bus     *busevents.EventBus
	m       *lifecycle.Manager
	logs    *logRecorder
	ready   chan lifecycle.TermReport
	stopped chan lifecycle.TermStopReport
	cancel  context.CancelFunc
	runErr  chan error
	// lifecycle events seen on the bus
	lifeMu sync.Mutex
	life   []busevents.Event
}

// newHarness builds the bus and the Manager, lets setup register
// components, starts the bus and runs the Manager. Call it inside a bubble.
func newHarness(t *testing.T, opts lifecycle.Options, setup func(h *harness)) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		logs:    &logRecorder{},
		ready:   make(chan lifecycle.TermReport, 1024),
		stopped: make(chan lifecycle.TermStopReport, 1024),
		runErr:  make(chan error, 1),
	}
	h.bus = busevents.NewEventBusWithLogger(0, slog.New(h.logs))
	opts.Logger = slog.New(h.logs)
	userReady, userStopped := opts.OnTermReady, opts.OnTermStopped
	opts.OnTermReady = func(r lifecycle.TermReport) {
		if userReady != nil {
			userReady(r)
		}
		h.ready <- r
	}
	opts.OnTermStopped = func(r lifecycle.TermStopReport) {
		if userStopped != nil {
			userStopped(r)
		}
		h.stopped <- r
	}
	m, err := lifecycle.NewManager(h.bus, opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	h.m = m
	lifeCh := busevents.Subscribe[busevents.Event](context.Background(), h.bus, "test-lifecycle", 1024, busevents.Types(
		events.EventTypeTermReady, events.EventTypeTermStopped,
		events.EventTypeComponentFailed, events.EventTypeComponentOverstayed,
	))
	if setup != nil {
		setup(h)
	}
	h.bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.runErr <- m.Run(ctx) }()
	go func() {
		for ev := range lifeCh {
			h.lifeMu.Lock()
			h.life = append(h.life, ev)
			h.lifeMu.Unlock()
		}
	}()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop ends Run, checks it returned nil, and stops the bus. Idempotent.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	if err := <-h.runErr; err != nil {
		h.t.Errorf("Run returned %v, want nil", err)
	}
	<-h.m.Done()
	h.bus.Stop()
}

func (h *harness) lead(term uint64) {
	h.bus.Publish(events.NewBecameLeaderEvent("me", term))
}

func (h *harness) lose(term uint64, reason string) {
	h.bus.Publish(events.NewLostLeadershipEvent("me", term, reason))
}

// awaitReady waits for the term-ready report of term.
func (h *harness) awaitReady(term uint64) lifecycle.TermReport {
	h.t.Helper()
	r := <-h.ready
	if r.Term != term {
		h.t.Fatalf("term ready for term %d, want %d", r.Term, term)
	}
	return r
}

func (h *harness) awaitStopped(term uint64) lifecycle.TermStopReport {
	h.t.Helper()
	r := <-h.stopped
	if r.Term != term {
		h.t.Fatalf("term stopped for term %d, want %d", r.Term, term)
	}
	return r
}

// noReady fails if a term-ready report is pending.
func (h *harness) noReady() {
	h.t.Helper()
	select {
	case r := <-h.ready:
		h.t.Fatalf("unexpected term ready: %+v", r)
	default:
	}
}

// lifeEvents returns the lifecycle events of Go type T published so far.
// It waits for the bubble to settle, so call it from the test goroutine.
func lifeEvents[T busevents.Event](h *harness) []T {
	synctest.Wait()
	h.lifeMu.Lock()
	defer h.lifeMu.Unlock()
	var out []T
	for _, ev := range h.life {
		if v, ok := ev.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func mustStatus(t *testing.T, s lifecycle.Status, name string) lifecycle.ComponentStatus {
	t.Helper()
	c, ok := s.Component(name)
	if !ok {
		t.Fatalf("no status for component %q", name)
	}
	return c
}

var errBoom = errors.New("boom")

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
