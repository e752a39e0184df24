package lifecycle_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// A component registered with AddLeaderOnly that subscribes with a plain
// Subscribe[T] under the context it was given (no LeaderOnly option) gets a
// leader-only subscription, with no warning, that ends with the term; an
// all-replica component subscribing the same way after the bus started does
// not, and is warned about. Leader-only is given by registration.
func TestLeaderOnlyContextMarksSubscriptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		allCtx := make(chan bool, 1)
		leaderCtx := make(chan bool, 1)
		got := make(chan *events.ConfigValidatedEvent, 1)
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			all := funcComponent{name: "all", fn: func(ctx context.Context) error {
				busevents.Subscribe[*events.ConfigValidatedEvent](ctx, h.bus, "all-sub", 4)
				allCtx <- busevents.IsLeaderOnly(ctx)
				<-ctx.Done()
				return nil
			}}
			leader := funcComponent{name: "leader", fn: func(ctx context.Context) error {
				ch := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, h.bus, "leader-sub", 4)
				lifecycle.Subscribed(ctx)
				leaderCtx <- busevents.IsLeaderOnly(ctx)
				select {
				case ev, ok := <-ch:
					if ok {
						got <- ev
					}
				case <-ctx.Done():
				}
				<-ctx.Done()
				return nil
			}}
			if err := h.m.AddAllReplica(all); err != nil {
				t.Fatal(err)
			}
			if err := h.m.AddLeaderOnly(leader); err != nil {
				t.Fatal(err)
			}
		})
		defer h.stop()
		if <-allCtx {
			t.Error("all-replica component's context is leader-only")
		}
		h.lead(3)
		if !<-leaderCtx {
			t.Error("leader-only component's context is not leader-only")
		}
		synctest.Wait()
		subs := map[string]busevents.SubscriberStats{}
		for _, st := range h.bus.Stats().Subscribers {
			subs[st.Name] = st
		}
		if st, ok := subs["leader-sub"]; !ok || !st.LeaderOnly {
			t.Errorf("subscription made under the term's context: %+v (found %v), want leader-only", st, ok)
		}
		if st, ok := subs["all-sub"]; !ok || st.LeaderOnly {
			t.Errorf("all-replica subscription: %+v (found %v), want not leader-only", st, ok)
		}
		const warning = "all-replica subscription made after the event bus started"
		if n := h.logs.count(warning, "leader-sub"); n != 0 {
			t.Errorf("the leader-only subscription was warned about %d times", n)
		}
		if n := h.logs.count(warning, "all-sub"); n != 1 {
			t.Errorf("the late all-replica subscription was warned about %d times, want 1", n)
		}

		// The subscription is routed by T and delivers.
		h.bus.Publish(events.NewConfigValidatedEvent(nil, "v1", "test"))
		synctest.Wait()
		select {
		case ev := <-got:
			if ev.Version != "v1" {
				t.Errorf("leader-only component got version %q, want v1", ev.Version)
			}
		default:
			t.Error("leader-only component got no event")
		}

		// It ends with the term.
		h.lose(3, "test")
		h.awaitStopped(3)
		synctest.Wait()
		for _, st := range h.bus.Stats().Subscribers {
			if st.Name == "leader-sub" {
				t.Errorf("leader-only subscription outlived its term: %+v", st)
			}
		}
	})
}
