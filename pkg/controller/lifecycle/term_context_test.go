package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
)

// lazySource is a source term context whose end shows in Err before its
// Done channel closes, as an elector's term context may between the lapse
// of its renew deadline and the moment anything runs to cancel it.
type lazySource struct {
	context.Context // Background: Done never closes
	expired         atomic.Bool
}

func (s *lazySource) Err() error {
	if s.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// ctxGrabber is a leader-only component that hands out its context.
type ctxGrabber struct{ got chan context.Context }

func (g *ctxGrabber) Name() string { return "grabber" }

func (g *ctxGrabber) Start(ctx context.Context) error {
	lifecycle.Subscribed(ctx)
	g.got <- ctx
	<-ctx.Done()
	return ctx.Err()
}

// TestTermContextKeepsTheContextContract: the term context reports the end
// of its source at once, and Err is non-nil only once Done is closed, for
// the term context and for contexts derived from it.
func TestTermContextKeepsTheContextContract(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := busevents.NewEventBusWithLogger(16, slog.New(slog.DiscardHandler))
		src := &lazySource{Context: context.Background()}
		m, err := lifecycle.NewManager(bus, lifecycle.Options{
			Logger:      slog.New(slog.DiscardHandler),
			TermContext: func(uint64) (context.Context, bool) { return src, true },
		})
		if err != nil {
			t.Fatal(err)
		}
		g := &ctxGrabber{got: make(chan context.Context, 1)}
		if err := m.AddLeaderOnly(g); err != nil {
			t.Fatal(err)
		}
		bus.Start()
		defer bus.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		bus.Publish(leadership.NewBecameLeaderEvent("me", 15))
		run := <-g.got
		derived, stop := context.WithCancel(run)
		defer stop()

		for name, c := range map[string]context.Context{"run": run, "derived": derived} {
			if n, ok := termctx.FromContext(c); !ok || n != 15 {
				t.Errorf("term of the %s context = %d, %v; want 15, true", name, n, ok)
			}
		}
		if run.Err() != nil || isClosed(run.Done()) {
			t.Fatalf("live term: Err %v, Done closed %v", run.Err(), isClosed(run.Done()))
		}

		src.expired.Store(true) // Done of the source never closes
		// The run's context first: derived contexts end when it does.
		for _, nc := range []struct {
			name string
			c    context.Context
		}{{"run", run}, {"derived", derived}} {
			name, c := nc.name, nc.c
			err := c.Err()
			if err == nil {
				t.Errorf("%s: Err is nil after the source ended", name)
			}
			if err != nil && !isClosed(c.Done()) {
				t.Errorf("%s: Err = %v while Done is still open", name, err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: Err = %v, want context.Canceled", name, err)
			}
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestTermContextDoneAloneSeesTheSource: a caller that only selects on Done
// sees the source's end too.
func TestTermContextDoneAloneSeesTheSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := busevents.NewEventBusWithLogger(16, slog.New(slog.DiscardHandler))
		src := &lazySource{Context: context.Background()}
		m, err := lifecycle.NewManager(bus, lifecycle.Options{
			Logger:      slog.New(slog.DiscardHandler),
			TermContext: func(uint64) (context.Context, bool) { return src, true },
		})
		if err != nil {
			t.Fatal(err)
		}
		g := &ctxGrabber{got: make(chan context.Context, 1)}
		if err := m.AddLeaderOnly(g); err != nil {
			t.Fatal(err)
		}
		bus.Start()
		defer bus.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		bus.Publish(leadership.NewBecameLeaderEvent("me", 3))
		run := <-g.got
		src.expired.Store(true)
		if !isClosed(run.Done()) {
			t.Error("Done still open after the source ended")
		}
		cancel()
		<-done
	})
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSourceEndReachesWaitingRuns: when the source's Done closes, the
// Manager ends the term's context by itself: a run blocked on the Done
// channel it took at its start returns, and a context derived from the
// run's ends with the cause, though nobody calls Err or Done on the term's
// context after the source ended.
func TestSourceEndReachesWaitingRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errSource := errors.New("source: lease taken")
		srcs := make(chan context.CancelCauseFunc, 1)
		derived := make(chan context.Context, 1)
		returned := make(chan error, 1)
		waiter := funcComponent{name: "waiter", fn: func(ctx context.Context) error {
			d, stop := context.WithCancel(ctx)
			defer stop()
			done := ctx.Done()
			lifecycle.Subscribed(ctx)
			derived <- d
			<-done
			<-d.Done() // cancelled right after done closed, by the same cancel
			returned <- context.Cause(d)
			return nil
		}}
		h := newHarness(t, lifecycle.Options{TermContext: func(uint64) (context.Context, bool) {
			src, end := context.WithCancelCause(context.Background())
			srcs <- end
			return src, true
		}}, func(h *harness) {
			if err := h.m.AddLeaderOnly(waiter); err != nil {
				t.Fatal(err)
			}
		})
		h.lead(1)
		d := <-derived
		dDone := d.Done()
		synctest.Wait()
		(<-srcs)(errSource)
		synctest.Wait()
		if !isClosed(dDone) {
			t.Fatal("the derived context is live after the source ended")
		}
		select {
		case cause := <-returned:
			if !errors.Is(cause, lifecycle.ErrLeadershipLost) || !errors.Is(cause, errSource) {
				t.Errorf("cause %v, want ErrLeadershipLost wrapping the source's", cause)
			}
		default:
			t.Fatal("the run still waits on its Done after the source ended")
		}
		if cs := mustStatus(t, h.m.Status(), "waiter"); cs.State != lifecycle.StateStopped {
			t.Errorf("waiter %+v, want a clean stop", cs)
		}
	})
}
