package lifecycle_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
)

// everyTermComponent is a leader-only component that subscribes at the top of
// every term, as every leader-only component does: with
// busevents.Subscribe[T] under the ctx the Manager gives it. Each term
// gets a new channel, closed when the term ends.
type everyTermComponent struct {
	bus   *busevents.EventBus
	chans map[<-chan *events.ConfigValidatedEvent]bool
}

func (k *everyTermComponent) Name() string { return "keeper" }
func (k *everyTermComponent) RequiredState() []string {
	return []string{events.EventTypeConfigValidated}
}

func (k *everyTermComponent) Start(ctx context.Context) error {
	term, _ := termctx.FromContext(ctx)
	ch := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, k.bus, "keeper", 4)
	k.chans[ch] = true
	lifecycle.Subscribed(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				return nil // closed: the term ended
			}
			fmt.Printf("term %d: config %s (channels so far: %d)\n", term, ev.Version, len(k.chans))
			lifecycle.HoldsState(ctx, ev.EventType())
		}
	}
}

func Example_subscribeEveryTerm() {
	bus := busevents.NewEventBus(0)
	ready := make(chan lifecycle.TermReport, 1)
	stopped := make(chan lifecycle.TermStopReport, 1)
	m, _ := lifecycle.NewManager(bus, lifecycle.Options{
		Logger:        slog.New(slog.DiscardHandler),
		OnTermReady:   func(r lifecycle.TermReport) { ready <- r },
		OnTermStopped: func(r lifecycle.TermStopReport) { stopped <- r },
	})
	cfgR := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus).WithLogger(slog.New(slog.DiscardHandler))
	_ = m.AddLeaderOnly(&everyTermComponent{bus: bus, chans: map[<-chan *events.ConfigValidatedEvent]bool{}})
	_ = m.AddReplayer("config", cfgR)
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	cfgR.Publish(events.NewConfigValidatedEvent(&config.Config{}, "v1", "example"))
	for term := uint64(1); term <= 2; term++ {
		bus.Publish(events.NewBecameLeaderEvent("replica-0", term))
		<-ready
		bus.Publish(events.NewLostLeadershipEvent("replica-0", term, "example"))
		<-stopped
	}
	cancel()
	<-done
	bus.Stop()
	// Output:
	// term 1: config v1 (channels so far: 1)
	// term 2: config v1 (channels so far: 2)
}
