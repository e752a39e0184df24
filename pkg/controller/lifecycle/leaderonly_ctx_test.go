package lifecycle_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// A leader-only component's context is leader-only for the bus, so a
// Subscribe[T] made under it is leader-only without the option; an
// all-replica component's is not.
func TestLeaderOnlyContextMarksSubscriptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		allCtx := make(chan bool, 1)
		leaderCtx := make(chan bool, 1)
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			all := funcComponent{name: "all", fn: func(ctx context.Context) error {
				allCtx <- busevents.IsLeaderOnly(ctx)
				<-ctx.Done()
				return nil
			}}
			leader := funcComponent{name: "leader", fn: func(ctx context.Context) error {
				busevents.Subscribe[busevents.Event](ctx, h.bus, "leader-sub", 4, busevents.Types("x"))
				lifecycle.Subscribed(ctx)
				leaderCtx <- busevents.IsLeaderOnly(ctx)
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
		if <-allCtx {
			t.Error("all-replica component's context is leader-only")
		}
		h.lead(3)
		if !<-leaderCtx {
			t.Error("leader-only component's context is not leader-only")
		}
		synctest.Wait()
		for _, st := range h.bus.Stats().Subscribers {
			if st.Name == "leader-sub" && !st.LeaderOnly {
				t.Errorf("subscription made under the term's context is not leader-only: %+v", st)
			}
		}
	})
}
