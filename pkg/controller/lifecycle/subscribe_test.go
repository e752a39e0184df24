package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/internal/testseed"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
)

// termReader is a leader-only component that subscribes with
// busevents.Subscribe[T] under its run's context and records, per term, the channel it got and the
// configuration versions it read. In a lazy term it reads one event and
// then nothing, so that events are left unread in its channel when the
// term ends.
type termReader struct {
	bus *busevents.EventBus

	mu    sync.Mutex
	lazy  map[uint64]bool
	chans map[uint64]<-chan *events.ConfigValidatedEvent
	got   map[uint64][]int
}

func (r *termReader) Name() string            { return "kept-reader" }
func (r *termReader) RequiredState() []string { return []string{events.EventTypeConfigValidated} }

func (r *termReader) Start(ctx context.Context) error {
	term, _ := termctx.FromContext(ctx)
	ch := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, r.bus, "cfg", 64)
	r.mu.Lock()
	r.chans[term] = ch
	lazy := r.lazy[term]
	r.mu.Unlock()
	lifecycle.Subscribed(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				if ctx.Err() != nil {
					return nil // closed as the term ended
				}
				return fmt.Errorf("channel closed in term %d while it lasts", term)
			}
			v, _ := strconv.Atoi(ev.Version)
			r.mu.Lock()
			r.got[term] = append(r.got[term], v)
			r.mu.Unlock()
			lifecycle.HoldsState(ctx, events.EventTypeConfigValidated)
			if lazy {
				<-ctx.Done()
				return ctx.Err()
			}
		}
	}
}

// TestSubscriptionPerTermRandomized runs terms of a leader-only component
// that subscribes at the top of every term, with seeded random publishes
// of configuration versions (increasing numbers) between terms and during
// them, through the config replayer, and terms in which the component
// leaves events unread. Checked for each term:
//   - the component gets a new channel in every term, closed when the term
//     has ended, with at most what it left unread in it;
//   - it reads nothing stale: its first read is the newest version
//     published before the term started (the replay, also when it read
//     that very version in an earlier term and nothing was published
//     since), and every read is newer than the one before;
//   - in a term it reads fully, it reads every version published during
//     the term;
//   - between terms no subscription of the component is routed (the bus
//     lists none live).
//
// A failure names its seed; BATON_SEED=<seed> replays it.
func TestSubscriptionPerTermRandomized(t *testing.T) {
	seeds := testseed.Seeds(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}...)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { readTerms(t, seed) })
		})
	}
}

func readTerms(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6e97))
	bus := busevents.NewEventBusWithLogger(0, discard())
	m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	r := &termReader{bus: bus, lazy: map[uint64]bool{}, chans: map[uint64]<-chan *events.ConfigValidatedEvent{}, got: map[uint64][]int{}}
	cfgR := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus).WithLogger(discard())
	if err := m.AddLeaderOnly(r); err != nil {
		t.Fatal(err)
	}
	if err := m.AddReplayer("config", cfgR); err != nil {
		t.Fatal(err)
	}
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		bus.Stop()
	}()

	newest := 0
	publish := func(n int) {
		for range n {
			newest++
			cfgR.Publish(events.NewConfigValidatedEvent(&config.Config{}, strconv.Itoa(newest), "test"))
		}
	}
	publish(1)
	var last <-chan *events.ConfigValidatedEvent
	for term := uint64(1); term <= 40; term++ {
		publish(rng.IntN(4)) // between terms; none at all is the replay-only case
		atStart := newest
		lazy := rng.IntN(3) == 0
		r.mu.Lock()
		r.lazy[term] = lazy
		r.mu.Unlock()
		bus.Publish(events.NewBecameLeaderEvent("me", term))
		synctest.Wait()
		publish(rng.IntN(4))
		synctest.Wait()
		atEnd := newest
		bus.Publish(events.NewLostLeadershipEvent("me", term, "test"))
		synctest.Wait()

		where := fmt.Sprintf("seed %d term %d (lazy %t)", seed, term, lazy)
		r.mu.Lock()
		ch, got := r.chans[term], r.got[term]
		r.mu.Unlock()
		if ch == last {
			t.Fatalf("%s: the channel of the term before", where)
		}
		last = ch
		for v := range ch { // closed: Range ends
			if v == nil {
				t.Fatalf("%s: nil event", where)
			}
		}
		if len(got) == 0 || got[0] != atStart {
			t.Fatalf("%s: read %v, want first the newest at the term's start, %d", where, got, atStart)
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("%s: read %v: stale or repeated", where, got)
			}
		}
		if !lazy && got[len(got)-1] != atEnd {
			t.Fatalf("%s: read %v, want every version up to %d", where, got, atEnd)
		}
		for _, s := range bus.Stats().Subscribers {
			if s.Name == "cfg" {
				t.Fatalf("%s: the component's subscription is routed between terms", where)
			}
		}
	}
}

// TestTwoSubscriptionsOfOneNameEndWithTheTerm: a second call for one name
// in one run gets a channel of its own, and both close with the term.
func TestTwoSubscriptionsOfOneNameEndWithTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan [2]<-chan *events.ConfigValidatedEvent, 1)
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			if err := h.m.AddLeaderOnly(funcComponent{name: "twice", fn: func(ctx context.Context) error {
				a := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, h.bus, "cfg", 1)
				b := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, h.bus, "cfg", 1)
				got <- [2]<-chan *events.ConfigValidatedEvent{a, b}
				lifecycle.Subscribed(ctx)
				<-ctx.Done()
				return ctx.Err()
			}}); err != nil {
				t.Fatal(err)
			}
		})
		h.lead(1)
		h.awaitReady(1)
		chans := <-got
		if chans[0] == chans[1] {
			t.Fatal("a second call for one name in one run got the first's channel")
		}
		h.lose(1, "test")
		synctest.Wait()
		for i, ch := range chans {
			if _, open := <-ch; open {
				t.Errorf("channel %d outlived its term", i)
			}
		}
		h.stop()
	})
}
