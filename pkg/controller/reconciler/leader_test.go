package reconciler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// replica is one controller process as the command wires it: the
// all-replica side's replayers (standing in for ConfigChangeHandler and
// Discovery), the Reconciler, the Coordinator, and the lifecycle Manager.
type replica struct {
	bus      *busevents.EventBus
	cfgs     *leadership.StateReplayer[*events.ConfigValidatedEvent]
	pods     *leadership.StateReplayer[*events.HAProxyPodsDiscoveredEvent]
	rec      *reconciler.Reconciler
	coord    *reconciler.Coordinator
	mgr      *lifecycle.Manager
	rendered <-chan *events.TemplateRenderedEvent

	mu    sync.Mutex
	ready []lifecycle.TermReport
}

func newReplica(t *testing.T) *replica {
	t.Helper()
	r := &replica{bus: newBus(t)}
	var err error
	r.mgr, err = lifecycle.NewManager(r.bus, lifecycle.Options{Logger: discard, OnTermReady: func(rep lifecycle.TermReport) {
		r.mu.Lock()
		r.ready = append(r.ready, rep)
		r.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.cfgs = leadership.NewStateReplayer[*events.ConfigValidatedEvent](r.bus)
	r.pods = leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](r.bus)
	if r.rec, err = reconciler.NewReconciler(r.bus, reconciler.ReconcilerOptions{Logger: discard}); err != nil {
		t.Fatal(err)
	}
	if r.coord, err = reconciler.NewCoordinator(r.bus, reconciler.CoordinatorOptions{Logger: discard}); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		r.mgr.AddAllReplica(r.rec),
		r.mgr.AddLeaderOnly(r.coord),
		r.mgr.AddReplayer("config", r.cfgs),
		r.mgr.AddReplayer("pods", r.pods),
		r.mgr.AddTermHook("reconcile", r.rec.TriggerNow),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	r.rendered = busevents.Subscribe[*events.TemplateRenderedEvent](context.Background(), r.bus, "test-rendered", 64)
	return r
}

// publish does what an all-replica state source does: publish, then cache.
func (r *replica) publishConfig(version string) {
	e := testConfig(version)
	r.bus.Publish(e)
	r.cfgs.Cache(e)
}

func (r *replica) publishPods(gen uint64, n int) {
	e := testPods(gen, n)
	r.bus.Publish(e)
	r.pods.Cache(e)
}

func (r *replica) renders() []*events.TemplateRenderedEvent {
	var out []*events.TemplateRenderedEvent
	for {
		select {
		case e := <-r.rendered:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestNewLeaderRendersNewestState: a new leader's first TemplateRenderedEvent
// is rendered from the newest configuration and pods published before it
// was elected (reaching it through the replayers), is stamped with its term,
// and is the only render of the term's start: no stale render is replayed
// and the replays cause no second render. Over two terms, with changes made
// while no one leads.
func TestNewLeaderRendersNewestState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReplica(t)
		r.bus.Start()
		ctx, cancel := context.WithCancel(context.Background())
		runErr := make(chan error, 1)
		go func() { runErr <- r.mgr.Run(ctx) }()

		// Before any election: history on the all-replica side.
		r.publishConfig("v1")
		r.publishPods(1, 1)
		r.publishConfig("v2")
		r.publishPods(2, 2)
		r.publishPods(3, 3)
		time.Sleep(5 * time.Second) // debounced triggers fire, to no one
		if got := r.renders(); len(got) != 0 {
			t.Fatalf("%d renders before any leader", len(got))
		}

		check := func(term uint64, version string, gen uint64, ips ...string) {
			t.Helper()
			elected := time.Now()
			r.bus.Publish(events.NewBecameLeaderEvent("me", term))
			synctest.Wait()
			got := r.renders()
			if len(got) == 0 {
				t.Fatalf("term %d: no render", term)
			}
			first := got[0]
			if first.Term != term || first.ConfigVersion != version || first.PodGeneration != gen {
				t.Errorf("term %d: first render term %d config %q generation %d, want %d %q %d",
					term, first.Term, first.ConfigVersion, first.PodGeneration, term, version, gen)
			}
			if !first.Timestamp().Equal(elected) {
				t.Errorf("term %d: first render %s after election, want at once", term, first.Timestamp().Sub(elected))
			}
			for _, ip := range ips {
				if !strings.Contains(first.Output, " "+ip+":8080 ") {
					t.Errorf("term %d: first render lacks server %s:\n%s", term, ip, first.Output)
				}
			}
			if n := strings.Count(first.Output, "    server "); n != len(ips) {
				t.Errorf("term %d: %d server lines, want %d", term, n, len(ips))
			}
			time.Sleep(5 * time.Second) // any debounced trigger would fire now
			if more := r.renders(); len(got)+len(more) != 1 {
				t.Errorf("term %d: %d renders at the start of the term, want 1", term, len(got)+len(more))
			}
			r.mu.Lock()
			ready := append([]lifecycle.TermReport(nil), r.ready...)
			r.mu.Unlock()
			if len(ready) == 0 || ready[len(ready)-1].Term != term || ready[len(ready)-1].Latency != 0 {
				t.Errorf("term %d: term-ready reports %+v, want this term ready at once", term, ready)
			}
			if st := r.coord.Status(); st.Term != term || st.Runs != 1 || st.ConfigVersion != version || st.PodGeneration != gen {
				t.Errorf("term %d: coordinator status %+v", term, st)
			}
		}
		check(5, "v2", 3, "10.3.0.1", "10.3.0.2", "10.3.0.3")

		// A change while leading is debounced into one render.
		r.publishPods(4, 1)
		time.Sleep(time.Second)
		if got := r.renders(); len(got) != 1 || got[0].PodGeneration != 4 || got[0].Term != 5 {
			t.Errorf("renders after a change in term 5: %v", got)
		}

		r.bus.Publish(events.NewLostLeadershipEvent("me", 5, "test"))
		synctest.Wait()
		// Changes while another replica leads.
		r.publishConfig("v3")
		r.publishPods(5, 2)
		time.Sleep(5 * time.Second)
		if got := r.renders(); len(got) != 0 {
			t.Fatalf("%d renders while not leading", len(got))
		}
		check(8, "v3", 5, "10.5.0.1", "10.5.0.2")
		if st := r.bus.Stats(); st.Replayed[events.EventTypeConfigValidated] != 2 || st.Replayed[events.EventTypeHAProxyPodsDiscovered] != 2 {
			t.Errorf("replays %v, want one of each type per term", st.Replayed)
		}

		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run = %v", err)
		}
		<-r.mgr.Done()
	})
}

// TestNewLeaderByHand drives a term's sequence without the Manager, the way
// the Manager orders it: state published and cached before, then the
// Coordinator starts and subscribes, then the replays, then TriggerNow.
func TestNewLeaderByHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		cfgs := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
		pods := leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](bus)
		rec, _ := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Logger: discard})
		out := subscribeOutcomes(bus)
		bus.Start()
		for _, v := range []string{"a", "b", "c"} {
			e := testConfig(v)
			cfgs.Cache(e)
			bus.Publish(e)
		}
		for gen := uint64(1); gen <= 4; gen++ {
			e := testPods(gen, int(gen))
			pods.Cache(e)
			bus.Publish(e)
		}
		c := newCoordinator(t, bus, nil, 0)
		stop := startCoordinator(t, c) // returns once Start blocks, subscribed
		if !cfgs.Replay() || !pods.Replay() {
			t.Fatal("nothing to replay")
		}
		rec.TriggerNow(1)
		synctest.Wait()
		got := eventstest.Drain(out.rendered)
		if len(got) != 1 || got[0].ConfigVersion != "c" || got[0].PodGeneration != 4 || strings.Count(got[0].Output, "    server ") != 4 {
			t.Fatalf("renders %v, want one of c/4 with 4 servers", got)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}
