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

// publisher is a leader-only component that needs the validated config.
type publisher struct{ bus *busevents.EventBus }

func (p *publisher) Name() string            { return "publisher" }
func (p *publisher) RequiredState() []string { return []string{events.EventTypeConfigValidated} }

func (p *publisher) Start(ctx context.Context) error {
	term, _ := termctx.FromContext(ctx)
	// Leader-only because the Manager runs it as leader-only; the channel
	// closes when the term ends.
	ch := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, p.bus, "publisher", 4)
	lifecycle.Subscribed(ctx) // the replay may go out now
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				return ctx.Err() // the term ended
			}
			fmt.Printf("publisher: term %d holds config %s\n", term, ev.Version)
			lifecycle.HoldsState(ctx, ev.EventType())
		}
	}
}

func Example() {
	bus := busevents.NewEventBus(0)
	ready := make(chan lifecycle.TermReport, 1)
	stopped := make(chan lifecycle.TermStopReport, 1)
	m, err := lifecycle.NewManager(bus, lifecycle.Options{
		Logger:        slog.New(slog.DiscardHandler),
		OnTermReady:   func(r lifecycle.TermReport) { ready <- r },
		OnTermStopped: func(r lifecycle.TermStopReport) { stopped <- r },
	})
	if err != nil {
		panic(err)
	}
	// The all-replica side cached the validated config before this replica led.
	configReplayer := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
	if err := m.AddLeaderOnly(&publisher{bus: bus}); err != nil {
		panic(err)
	}
	if err := m.AddReplayer("config", configReplayer); err != nil {
		panic(err)
	}
	bus.Start()
	cfg := events.NewConfigValidatedEvent(&config.Config{}, "v1", "example")
	bus.Publish(cfg)
	configReplayer.Cache(cfg)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	bus.Publish(events.NewBecameLeaderEvent("replica-0", 7))
	r := <-ready
	fmt.Printf("term %d ready\n", r.Term)
	bus.Publish(events.NewLostLeadershipEvent("replica-0", 7, "lease taken by replica-1"))
	s := <-stopped
	fmt.Printf("term %d stopped: %s\n", s.Term, s.Reason)

	cancel()
	fmt.Println("run:", <-done)
	bus.Stop()
	// Output:
	// publisher: term 7 holds config v1
	// term 7 ready
	// term 7 stopped: lost leadership: lease taken by replica-1
	// run: <nil>
}
