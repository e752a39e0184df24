package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
)

func TestMain(m *testing.M) {
	// The replayers log every replay through slog.Default.
	slog.SetDefault(discard())
	goleak.VerifyTestMain(m)
}

func TestNewManagerRejectsBadInput(t *testing.T) {
	if _, err := lifecycle.NewManager(nil, lifecycle.Options{}); !errors.Is(err, lifecycle.ErrNilBus) {
		t.Errorf("nil bus: %v, want ErrNilBus", err)
	}
	started := busevents.NewEventBus(0)
	started.Start()
	defer started.Stop()
	if _, err := lifecycle.NewManager(started, lifecycle.Options{}); !errors.Is(err, lifecycle.ErrBusStarted) {
		t.Errorf("started bus: %v, want ErrBusStarted", err)
	}
	for _, tc := range []struct {
		opts  lifecycle.Options
		field string
	}{
		{lifecycle.Options{StopTimeout: -1}, "stopTimeout"},
		{lifecycle.Options{SubscribeTimeout: -time.Second}, "subscribeTimeout"},
	} {
		_, err := lifecycle.NewManager(busevents.NewEventBus(0), tc.opts)
		if !errors.Is(err, lifecycle.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("options %+v: %v, want ErrInvalidOptions naming %s", tc.opts, err, tc.field)
		}
	}
}

func TestRegistrationErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := busevents.NewEventBus(0)
		m, err := lifecycle.NewManager(bus, lifecycle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var nilHolder *holder
		var nilReplayer *leadership.StateReplayer[*events.ConfigValidatedEvent]
		h := newHolder(bus, "dup", events.EventTypeConfigValidated)
		if err := m.AddLeaderOnly(h); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"nil component":         m.AddLeaderOnly(nil),
			"typed nil component":   m.AddAllReplica(nilHolder),
			"empty name":            m.AddAllReplica(&allReplica{}),
			"duplicate name":        m.AddAllReplica(&allReplica{name: "dup"}),
			"state-dependent all":   m.AddAllReplica(newHolder(bus, "sd", events.EventTypeConfigValidated)),
			"empty required type":   m.AddLeaderOnly(newHolder(bus, "empty-type", "")),
			"nil replayer":          m.AddReplayer("config", nil),
			"typed nil replayer":    m.AddReplayer("config", nilReplayer),
			"nil hook":              m.AddTermHook("hook", nil),
			"empty hook name":       m.AddTermHook("", func(uint64) {}),
			"duplicate hook name":   errors.Join(m.AddTermHook("x", func(uint64) {}), m.AddTermHook("x", func(uint64) {})),
			"duplicate replay name": m.AddReplayer("x", leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)),
		} {
			if !errors.Is(err, lifecycle.ErrInvalidRegistration) {
				t.Errorf("%s: %v, want ErrInvalidRegistration", name, err)
			}
		}
		bus.Start()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if err := m.AddAllReplica(&allReplica{name: "late"}); !errors.Is(err, lifecycle.ErrRunning) {
			t.Errorf("AddAllReplica during Run: %v, want ErrRunning", err)
		}
		if err := m.AddTermHook("late", func(uint64) {}); !errors.Is(err, lifecycle.ErrRunning) {
			t.Errorf("AddTermHook during Run: %v, want ErrRunning", err)
		}
		if err := m.Run(ctx); !errors.Is(err, lifecycle.ErrRunning) {
			t.Errorf("second Run: %v, want ErrRunning", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if subs := bus.Stats().Subscribers; len(subs) != 0 {
			t.Errorf("Run left its subscription: %+v", subs)
		}
		bus.Stop()
	})
}

func TestTermStartAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ar := &allReplica{name: "discovery"}
		var a, b *holder
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			a = newHolder(h.bus, "publisher", events.EventTypeConfigValidated)
			a.required = nil
			b = newHolder(h.bus, "scheduler", events.EventTypeConfigValidated)
			b.required = nil
			for _, err := range []error{h.m.AddAllReplica(ar), h.m.AddLeaderOnly(a), h.m.AddLeaderOnly(b)} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		synctest.Wait()
		if ar.started.Load() != 1 || ar.ctxTerm.Load() {
			t.Fatalf("all-replica started %d times (term in ctx %v), want once without a term", ar.started.Load(), ar.ctxTerm.Load())
		}
		if s := h.m.Status(); !s.Running || s.Leading || mustStatus(t, s, "publisher").State != lifecycle.StateIdle {
			t.Fatalf("before leading: %+v", s)
		}

		h.lead(5)
		rep := h.awaitReady(5) // no required state: ready once the hooks ran
		if rep.Latency != 0 {
			t.Errorf("latency %v, want 0 in a bubble with nothing to wait for", rep.Latency)
		}
		s := h.m.Status()
		if !s.Leading || s.Term != 5 || !s.TermReady || s.Terms != 1 || s.ReadyTerms != 1 || s.LastReady.Term != 5 {
			t.Fatalf("leading: %+v", s)
		}
		for _, c := range []*holder{a, b} {
			if got := c.startedTerms(); !slices.Equal(got, []uint64{5}) {
				t.Errorf("%s started in terms %v, want [5]", c.name, got)
			}
			if cs := mustStatus(t, s, c.name); cs.State != lifecycle.StateRunning || cs.Term != 5 || !cs.Subscribed {
				t.Errorf("%s status %+v", c.name, cs)
			}
		}

		h.lose(5, "renew deadline missed")
		stop := h.awaitStopped(5)
		if stop.Reason != "lost leadership: renew deadline missed" || len(stop.Overstayed) != 0 {
			t.Errorf("stop report %+v", stop)
		}
		s = h.m.Status()
		if s.Leading || s.Term != 0 {
			t.Errorf("after loss: leading %v term %d", s.Leading, s.Term)
		}
		for _, c := range []*holder{a, b} {
			cs := mustStatus(t, s, c.name)
			if cs.State != lifecycle.StateStopped || cs.LastError != nil || cs.Subscribed {
				t.Errorf("%s after loss: %+v", c.name, cs)
			}
			if err := c.ctxs[0].Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("%s term ctx err %v", c.name, err)
			}
		}
		if cs := mustStatus(t, s, "discovery"); cs.State != lifecycle.StateRunning {
			t.Errorf("all-replica after loss: %+v", cs)
		}
		if len(h.stopped) != 0 || len(h.ready) != 0 || s.Terms != 1 || s.ReadyTerms != 1 {
			t.Errorf("term reports: %d stopped, %d ready beyond the one awaited; status counts %d terms, %d ready",
				len(h.stopped), len(h.ready), s.Terms, s.ReadyTerms)
		}
		if h.logs.count("became leader; starting term", "term=5") != 1 || h.logs.count("term ready", "term=5") != 1 {
			t.Errorf("transition log lines missing: %q", h.logs.lines)
		}

		h.stop()
		s = h.m.Status()
		if s.Running || mustStatus(t, s, "discovery").State != lifecycle.StateStopped {
			t.Errorf("after Run: %+v", s)
		}
	})
}

// TestReplayReachesLeaderOnlySubscribers runs many terms with a fast and a
// slow-to-subscribe leader-only component and real StateReplayers, and new
// state published while terms start: every component must hold the newest
// state of both types in every term, and the replays must have waited for
// the slow subscriber.
func TestReplayReachesLeaderOnlySubscribers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fast, slow, gosched *holder
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		var podR *leadership.StateReplayer[*events.HAProxyPodsDiscoveredEvent]
		var hookOrder []string
		types := []string{events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered}
		h := newHarness(t, lifecycle.Options{SubscribeTimeout: 2 * time.Second}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			podR = leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](h.bus)
			fast = newHolder(h.bus, "fast", types...)
			slow = newHolder(h.bus, "slow", types...)
			// Up to 1.9s: always within SubscribeTimeout.
			slow.subscribeDelay = func(term uint64) time.Duration { return time.Duration(term*397%1900) * time.Millisecond }
			gosched = newHolder(h.bus, "gosched", types...)
			gosched.subscribeDelay = func(term uint64) time.Duration {
				for range term % 7 {
					runtime.Gosched()
				}
				return 0
			}
			for _, err := range []error{
				h.m.AddLeaderOnly(fast), h.m.AddLeaderOnly(slow), h.m.AddLeaderOnly(gosched),
				h.m.AddReplayer("config", recordingReplayer{cfgR, &hookOrder, "config"}),
				h.m.AddReplayer("pods", recordingReplayer{podR, &hookOrder, "pods"}),
				h.m.AddTermHook("reconcile", func(uint64) { hookOrder = append(hookOrder, "reconcile") }),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		cfgVersion, podGen := 0, uint64(0)
		publishConfig := func() string {
			cfgVersion++
			v := fmt.Sprintf("v%d", cfgVersion)
			ev := events.NewConfigValidatedEvent(&config.Config{}, v, "test")
			h.bus.Publish(ev)
			cfgR.Cache(ev)
			return v
		}
		publishPods := func() uint64 {
			podGen++
			ev := events.NewHAProxyPodsDiscoveredEvent([]config.Pod{{Name: "p"}}, podGen)
			h.bus.Publish(ev)
			podR.Cache(ev)
			return podGen
		}
		publishConfig()
		publishPods()

		const terms = 150
		for term := uint64(1); term <= terms; term++ {
			if term%3 == 0 {
				publishConfig() // state changes between terms
			}
			hookOrder = hookOrder[:0]
			h.lead(term)
			// Half of the terms also see new state while they start.
			racer := make(chan struct{})
			if term%2 == 0 {
				go func() {
					defer close(racer)
					time.Sleep(time.Duration(term%5) * 100 * time.Millisecond)
					publishConfig()
					publishPods()
				}()
			} else {
				close(racer)
			}
			rep := h.awaitReady(term)
			<-racer
			wantDelay := time.Duration(term*397%1900) * time.Millisecond
			if rep.Latency < wantDelay {
				t.Fatalf("term %d ready after %v, before the slow component subscribed (%v)", term, rep.Latency, wantDelay)
			}
			synctest.Wait()
			if !slices.Equal(hookOrder, []string{"config", "pods", "reconcile"}) {
				t.Fatalf("term %d hook order %v", term, hookOrder)
			}
			wantCfg := fmt.Sprintf("v%d", cfgVersion)
			for _, c := range []*holder{fast, slow, gosched} {
				if got := c.lastConfig(term); got != wantCfg {
					t.Fatalf("term %d: %s holds config %q, want %q (received %d events)", term, c.name, got, wantCfg, len(c.received(term)))
				}
				var gen uint64
				for _, ev := range c.received(term) {
					if p, ok := ev.(*events.HAProxyPodsDiscoveredEvent); ok {
						if p.Generation < gen {
							t.Fatalf("term %d: %s got pods generation %d after %d", term, c.name, p.Generation, gen)
						}
						gen = p.Generation
					}
				}
				if gen != podGen {
					t.Fatalf("term %d: %s holds pods generation %d, want %d", term, c.name, gen, podGen)
				}
			}
			h.lose(term, "test")
			h.awaitStopped(term)
			// The components unsubscribed when their term ended: only the
			// manager's and the test's subscriptions are left.
			if n := len(h.bus.Stats().Subscribers); n != 2 {
				t.Fatalf("after term %d: %d subscriptions on the bus, want 2", term, n)
			}
		}
		s := h.m.Status()
		if s.SubscribeTimeouts != 0 || s.Terms != terms || s.ReadyTerms != terms || s.Failures != 0 {
			t.Errorf("status after %d terms: %+v", terms, s)
		}
	})
}

// recordingReplayer wraps a replayer to record the hook order.
type recordingReplayer struct {
	r     lifecycle.Replayer
	order *[]string
	name  string
}

func (r recordingReplayer) Replay() bool {
	*r.order = append(*r.order, r.name)
	return r.r.Replay()
}

// TestSubscriberPastSubscribeTimeoutStillGetsState: a component slower to
// subscribe than SubscribeTimeout is reported, the hooks run without it, and
// every hook (the replay and the trigger) runs again once it subscribes.
func TestSubscriberPastSubscribeTimeoutStillGetsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fast, slow *holder
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		hookRuns := 0
		h := newHarness(t, lifecycle.Options{SubscribeTimeout: time.Second}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			fast = newHolder(h.bus, "fast", events.EventTypeConfigValidated)
			slow = newHolder(h.bus, "slow", events.EventTypeConfigValidated)
			slow.subscribeDelay = func(uint64) time.Duration { return 3 * time.Second }
			for _, err := range []error{
				h.m.AddLeaderOnly(fast), h.m.AddLeaderOnly(slow),
				h.m.AddReplayer("config", cfgR),
				h.m.AddTermHook("reconcile", func(uint64) { hookRuns++ }),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		ev := events.NewConfigValidatedEvent(&config.Config{}, "v1", "test")
		h.bus.Publish(ev)
		cfgR.Cache(ev)

		h.lead(1)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		h.noReady()
		if fast.lastConfig(1) != "v1" || hookRuns != 1 {
			t.Fatalf("after the subscribe timeout: fast holds %q, hook runs %d", fast.lastConfig(1), hookRuns)
		}
		s := h.m.Status()
		if s.SubscribeTimeouts != 1 || mustStatus(t, s, "slow").SubscribeTimeouts != 1 || s.TermReady {
			t.Fatalf("status %+v", s)
		}
		if ov := lifeEvents[*events.ComponentOverstayedEvent](h); len(ov) != 1 || ov[0].Component != "slow" || ov[0].Phase != events.OverstaySubscribe {
			t.Fatalf("overstay events %+v", ov)
		}
		if h.logs.count("did not signal Subscribed in time", "component=slow") != 1 {
			t.Errorf("subscribe timeout not logged: %q", h.logs.lines)
		}

		rep := h.awaitReady(1)
		if rep.Latency != 3*time.Second {
			t.Errorf("latency %v, want 3s", rep.Latency)
		}
		if slow.lastConfig(1) != "v1" {
			t.Errorf("slow holds %q, want v1", slow.lastConfig(1))
		}
		synctest.Wait()
		if got := len(fast.received(1)); got != 1 {
			t.Errorf("fast received %d events; the second replay must skip it", got)
		}
		if hookRuns != 2 {
			t.Errorf("trigger hook ran %d times, want 2 (again for the late subscriber)", hookRuns)
		}
	})
}

func TestTermReadyWaitsForAllRequiredState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var both, cfgOnly *holder
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		var podR *leadership.StateReplayer[*events.HAProxyPodsDiscoveredEvent]
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			podR = leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](h.bus)
			both = newHolder(h.bus, "scheduler", events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered)
			cfgOnly = newHolder(h.bus, "publisher", events.EventTypeConfigValidated)
			for _, err := range []error{
				h.m.AddLeaderOnly(both), h.m.AddLeaderOnly(cfgOnly),
				h.m.AddReplayer("config", cfgR), h.m.AddReplayer("pods", podR),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		cfg := events.NewConfigValidatedEvent(&config.Config{}, "v1", "test")
		h.bus.Publish(cfg)
		cfgR.Cache(cfg)

		h.lead(9)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		h.noReady()
		s := h.m.Status()
		if s.TermReady || s.ReadyTerms != 0 {
			t.Fatalf("term ready without pods: %+v", s)
		}
		if cs := mustStatus(t, s, "scheduler"); !slices.Equal(cs.HeldState, []string{events.EventTypeConfigValidated}) {
			t.Errorf("scheduler holds %v", cs.HeldState)
		}
		if cs := mustStatus(t, s, "publisher"); !slices.Equal(cs.HeldState, []string{events.EventTypeConfigValidated}) {
			t.Errorf("publisher holds %v", cs.HeldState)
		}

		// The pods arrive live, not replayed.
		pods := events.NewHAProxyPodsDiscoveredEvent(nil, 1)
		h.bus.Publish(pods)
		podR.Cache(pods)
		rep := h.awaitReady(9)
		if rep.Latency != 10*time.Second || !rep.Ready.Equal(rep.Acquired.Add(10*time.Second)) {
			t.Errorf("report %+v, want latency 10s", rep)
		}
		synctest.Wait()
		h.noReady()
		if s := h.m.Status(); !s.TermReady || s.LastReady != rep {
			t.Errorf("status after ready %+v", s)
		}
	})
}

// TestOverstayingComponentIsNotStartedTwice: a component that ignores its
// cancelled context is reported and is only started again once it returned,
// late in the next term, which then becomes ready.
func TestOverstayingComponentIsNotStartedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stubborn, quick *holder
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		h := newHarness(t, lifecycle.Options{StopTimeout: time.Second}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			stubborn = newHolder(h.bus, "stubborn", events.EventTypeConfigValidated)
			stubborn.stopDelay = 10 * time.Second
			quick = newHolder(h.bus, "quick", events.EventTypeConfigValidated)
			for _, err := range []error{h.m.AddLeaderOnly(stubborn), h.m.AddLeaderOnly(quick), h.m.AddReplayer("config", cfgR)} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		ev := events.NewConfigValidatedEvent(&config.Config{}, "v1", "test")
		h.bus.Publish(ev)
		cfgR.Cache(ev)

		h.lead(1)
		h.awaitReady(1)
		lostAt := time.Now()
		h.lose(1, "test")
		stop := h.awaitStopped(1)
		if !slices.Equal(stop.Overstayed, []string{"stubborn"}) || stop.Stopped.Sub(lostAt) != time.Second {
			t.Fatalf("stop report %+v (after %v), want stubborn overstaying after 1s", stop, stop.Stopped.Sub(lostAt))
		}
		s := h.m.Status()
		if cs := mustStatus(t, s, "stubborn"); cs.State != lifecycle.StateOverstaying || cs.Overstays != 1 || s.Overstays != 1 {
			t.Fatalf("stubborn status %+v, overstays %d", cs, s.Overstays)
		}
		if ov := lifeEvents[*events.ComponentOverstayedEvent](h); len(ov) != 1 || ov[0].Phase != events.OverstayStop || ov[0].Waited != time.Second {
			t.Errorf("overstay events %+v", ov)
		}
		if h.logs.count("has not returned since its term ended", "work=stubborn") != 1 { // pkg/termrun's line
			t.Errorf("overstay not logged: %q", h.logs.lines)
		}

		h.lead(2)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := stubborn.startedTerms(); !slices.Equal(got, []uint64{1}) {
			t.Fatalf("stubborn started in terms %v while its first run was still going", got)
		}
		h.noReady()
		if h.logs.count("still running from an earlier term", "component=stubborn") != 1 {
			t.Errorf("blocked start not logged: %q", h.logs.lines)
		}
		// Its first run returns 10s after the loss; it then starts in term 2,
		// gets the replay and the term becomes ready.
		rep := h.awaitReady(2)
		if got := time.Since(lostAt); got != 10*time.Second {
			t.Errorf("term 2 ready %v after the loss, want 10s", got)
		}
		if got := stubborn.startedTerms(); !slices.Equal(got, []uint64{1, 2}) {
			t.Errorf("stubborn started in terms %v, want [1 2]", got)
		}
		if stubborn.lastConfig(2) != "v1" {
			t.Errorf("late-started stubborn holds %q in term 2", stubborn.lastConfig(2))
		}
		if stubborn.maxRunning != 1 {
			t.Errorf("stubborn ran %d Starts at once", stubborn.maxRunning)
		}
		if rep.Term != 2 {
			t.Errorf("report %+v", rep)
		}
		if cs := mustStatus(t, h.m.Status(), "stubborn"); cs.State != lifecycle.StateRunning || cs.Term != 2 {
			t.Errorf("stubborn status in term 2: %+v", cs)
		}
	})
}

func TestFailedComponentsAreMarkedFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failing *holder
		ar := &allReplica{name: "watcher", failAt: time.Second, err: errBoom}
		early := funcComponent{name: "early", fn: func(ctx context.Context) error {
			lifecycle.Subscribed(ctx)
			return nil
		}}
		cancelled := funcComponent{name: "own-timeout", fn: func(ctx context.Context) error {
			lifecycle.Subscribed(ctx)
			return context.DeadlineExceeded // from some other context: a failure
		}}
		panicky := funcComponent{name: "panicky", fn: func(ctx context.Context) error {
			lifecycle.Subscribed(ctx)
			panic("kaboom")
		}}
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			failing = newHolder(h.bus, "failing", events.EventTypeConfigValidated)
			failing.required = nil
			failing.fail = func(term uint64) error {
				if term == 1 {
					return errBoom
				}
				return nil
			}
			for _, err := range []error{
				h.m.AddAllReplica(ar), h.m.AddLeaderOnly(failing), h.m.AddLeaderOnly(early),
				h.m.AddLeaderOnly(cancelled), h.m.AddLeaderOnly(panicky),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		h.lead(1)
		h.awaitReady(1)
		synctest.Wait()
		s := h.m.Status()
		for name, want := range map[string]error{
			"failing": errBoom, "early": lifecycle.ErrReturnedEarly,
			"own-timeout": lifecycle.ErrReturnedEarly, "panicky": lifecycle.ErrPanicked,
		} {
			cs := mustStatus(t, s, name)
			if cs.State != lifecycle.StateFailed || !errors.Is(cs.LastError, want) || cs.Failures != 1 || cs.Term != 1 {
				t.Errorf("%s: %+v, want failed with %v", name, cs, want)
			}
			if h.logs.count("ERROR leader-only work failed", "work="+name) != 1 { // pkg/termrun's line
				t.Errorf("%s failure not logged", name)
			}
		}
		if !errors.Is(mustStatus(t, s, "own-timeout").LastError, context.DeadlineExceeded) {
			t.Errorf("own-timeout error should keep its cause")
		}
		if s.Failures != 4 {
			t.Errorf("failures %d, want 4", s.Failures)
		}
		if err := s.Healthy(); !errors.Is(err, lifecycle.ErrComponentFailed) || !strings.Contains(err.Error(), "failing in term 1") {
			t.Errorf("Healthy() = %v", err)
		}
		if fe := lifeEvents[*events.ComponentFailedEvent](h); len(fe) != 4 {
			t.Errorf("ComponentFailedEvents %+v", fe)
		}

		// The all-replica component fails; Run goes on. The leader-only ones
		// run again RestartDelay after their failure, in their term
		// (pkg/termrun), and fail again.
		time.Sleep(time.Second)
		synctest.Wait()
		s = h.m.Status()
		if cs := mustStatus(t, s, "watcher"); cs.State != lifecycle.StateFailed || !errors.Is(cs.LastError, errBoom) {
			t.Errorf("watcher %+v", cs)
		}
		if !s.Running || !strings.Contains(fmt.Sprint(s.Healthy()), "watcher") {
			t.Errorf("after all-replica failure: running %v healthy %v", s.Running, s.Healthy())
		}
		for _, name := range []string{"failing", "early", "own-timeout", "panicky"} {
			if cs := mustStatus(t, s, name); cs.Starts != 2 || cs.Failures != 2 || cs.Term != 1 {
				t.Errorf("%s a RestartDelay after its failure: %+v, want started again in term 1 and failed", name, cs)
			}
		}
		if got := failing.startedTerms(); !slices.Equal(got, []uint64{1, 1}) {
			t.Errorf("failing started in %v, want twice in term 1", got)
		}

		// The next term starts the failed leader-only components again.
		h.lose(1, "test")
		h.awaitStopped(1)
		h.lead(2)
		h.awaitReady(2)
		synctest.Wait()
		s = h.m.Status()
		if cs := mustStatus(t, s, "failing"); cs.State != lifecycle.StateRunning || cs.Starts != 3 || cs.Term != 2 {
			t.Errorf("failing in term 2: %+v", cs)
		}
		if got := failing.startedTerms(); !slices.Equal(got, []uint64{1, 1, 2}) {
			t.Errorf("failing started in %v", got)
		}
		if cs := mustStatus(t, s, "watcher"); cs.Starts != 1 {
			t.Errorf("all-replica restarted: %+v", cs)
		}
		if err := s.Healthy(); strings.Contains(fmt.Sprint(err), "failing") {
			t.Errorf("a retried component still unhealthy: %v", err)
		}
	})
}

func TestRestartInPlaceAcrossTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c *holder
		ar := &allReplica{name: "all"}
		var hookTerms []uint64
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			c = newHolder(h.bus, "publisher", events.EventTypeConfigValidated)
			for _, err := range []error{
				h.m.AddAllReplica(ar), h.m.AddLeaderOnly(c), h.m.AddReplayer("config", cfgR),
				h.m.AddTermHook("record", func(term uint64) { hookTerms = append(hookTerms, term) }),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		terms := []uint64{3, 7, 12}
		for i, term := range terms {
			ev := events.NewConfigValidatedEvent(&config.Config{}, fmt.Sprintf("v%d", i), "test")
			h.bus.Publish(ev)
			cfgR.Cache(ev)
			h.lead(term)
			h.awaitReady(term)
			if got := c.lastConfig(term); got != fmt.Sprintf("v%d", i) {
				t.Errorf("term %d: holds %q", term, got)
			}
			c.mu.Lock()
			got, _ := termctx.FromContext(c.ctxs[i])
			c.mu.Unlock()
			if got != term {
				t.Errorf("termctx.FromContext = %d, want %d", got, term)
			}
			h.lose(term, "test")
			h.awaitStopped(term)
		}
		if got := c.startedTerms(); !slices.Equal(got, terms) {
			t.Errorf("started in %v, want %v", got, terms)
		}
		if !slices.Equal(hookTerms, terms) {
			t.Errorf("hooks ran for %v", hookTerms)
		}
		synctest.Wait()
		s := h.m.Status()
		if cs := mustStatus(t, s, "publisher"); cs.Starts != 3 || cs.State != lifecycle.StateStopped {
			t.Errorf("publisher %+v", cs)
		}
		if ar.started.Load() != 1 || mustStatus(t, s, "all").State != lifecycle.StateRunning {
			t.Errorf("all-replica started %d times", ar.started.Load())
		}
		if s.Terms != 3 || s.ReadyTerms != 3 || s.LastReady.Term != 12 {
			t.Errorf("status %+v", s)
		}
	})
}

// TestPerTermStateReset: what a component held in one term does not count in
// the next one.
func TestPerTermStateReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c *holder
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			c = newHolder(h.bus, "publisher", events.EventTypeConfigValidated)
			for _, err := range []error{h.m.AddLeaderOnly(c), h.m.AddReplayer("config", cfgR)} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		ev := events.NewConfigValidatedEvent(&config.Config{}, "v1", "test")
		h.bus.Publish(ev)
		cfgR.Cache(ev)
		h.lead(1)
		h.awaitReady(1)
		h.lose(1, "test")
		h.awaitStopped(1)

		c.noHold.Store(true)
		h.lead(2)
		time.Sleep(time.Minute)
		synctest.Wait()
		h.noReady()
		s := h.m.Status()
		if s.TermReady || s.Term != 2 {
			t.Fatalf("term 2 ready on term 1's state: %+v", s)
		}
		if cs := mustStatus(t, s, "publisher"); len(cs.HeldState) != 0 || !cs.Subscribed {
			t.Errorf("term 2 status %+v", cs)
		}
		if len(c.received(2)) != 1 || len(c.received(1)) != 1 {
			t.Errorf("the component resets its own state per term: %d / %d", len(c.received(1)), len(c.received(2)))
		}
		// A signal made with term 1's context does not count for term 2.
		c.mu.Lock()
		oldCtx := c.ctxs[0]
		c.mu.Unlock()
		lifecycle.HoldsState(oldCtx, events.EventTypeConfigValidated)
		lifecycle.Subscribed(oldCtx)
		synctest.Wait()
		h.noReady()
		if s := h.m.Status(); s.TermReady {
			t.Fatal("a stale context's HoldsState made term 2 ready")
		}
	})
}

func TestLeadershipEventEdgeCases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c *holder
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			c = newHolder(h.bus, "publisher")
			if err := h.m.AddLeaderOnly(c); err != nil {
				t.Fatal(err)
			}
		})
		h.lose(1, "not leading yet") // ignored
		h.lead(0)                    // no term: ignored
		h.lead(3)
		h.awaitReady(3)
		h.lead(3) // repeated
		h.lead(4) // newer term without a loss: supersedes
		if r := h.awaitStopped(3); r.Reason != "superseded by term 4" {
			t.Errorf("stop reason %q", r.Reason)
		}
		h.awaitReady(4)
		h.lead(2)          // stale
		h.lose(3, "stale") // for an earlier term
		synctest.Wait()
		if s := h.m.Status(); !s.Leading || s.Term != 4 || s.Terms != 2 {
			t.Fatalf("status %+v", s)
		}
		if got := c.startedTerms(); !slices.Equal(got, []uint64{3, 4}) {
			t.Errorf("started in %v", got)
		}
		h.lose(0, "") // unknown term: ends the current one
		if r := h.awaitStopped(4); r.Reason != "lost leadership" {
			t.Errorf("stop reason %q", r.Reason)
		}
		h.lead(4) // already had it
		synctest.Wait()
		if s := h.m.Status(); s.Leading {
			t.Errorf("term 4 restarted")
		}
	})
}

func TestRunStopsTermThenAllReplicaOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var order []string
		record := func(name string) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				lifecycle.Subscribed(ctx)
				<-ctx.Done()
				if name == "leader" {
					time.Sleep(time.Second) // the all-replica side must still run meanwhile
				}
				order = append(order, name)
				return ctx.Err()
			}
		}
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			for _, err := range []error{
				h.m.AddAllReplica(funcComponent{"all", record("all")}),
				h.m.AddLeaderOnly(funcComponent{"leader", record("leader")}),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		h.lead(1)
		h.awaitReady(1)
		h.stop()
		if !slices.Equal(order, []string{"leader", "all"}) {
			t.Errorf("stop order %v", order)
		}
		if r := h.awaitStopped(1); r.Reason != "manager stopping" {
			t.Errorf("reason %q", r.Reason)
		}
	})
}

func TestRunReturnsWhenBusStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := busevents.NewEventBus(0)
		m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		ar := &allReplica{name: "all"}
		if err := m.AddAllReplica(ar); err != nil {
			t.Fatal(err)
		}
		bus.Start()
		done := make(chan error)
		go func() { done <- m.Run(context.Background()) }()
		synctest.Wait()
		bus.Stop()
		if err := <-done; !errors.Is(err, lifecycle.ErrBusStopped) {
			t.Errorf("Run = %v, want ErrBusStopped", err)
		}
		<-m.Done()
		if cs := mustStatus(t, m.Status(), "all"); cs.State != lifecycle.StateStopped {
			t.Errorf("all-replica %+v", cs)
		}
	})
}

// TestEventsBeforeRunAreKept: leadership published between bus.Start and
// Run waits in the manager's subscription.
func TestEventsBeforeRunAreKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := busevents.NewEventBus(0)
		ready := make(chan lifecycle.TermReport, 1)
		m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: discard(), OnTermReady: func(r lifecycle.TermReport) { ready <- r }})
		if err != nil {
			t.Fatal(err)
		}
		bus.Start()
		bus.Publish(events.NewBecameLeaderEvent("me", 8))
		time.Sleep(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		if r := <-ready; r.Term != 8 || r.Latency != time.Second {
			t.Errorf("report %+v", r)
		}
		cancel()
		<-done
		bus.Stop()
	})
}

// TestStatusIsSafeConcurrently polls Status while terms come and go; run with -race.
func TestStatusIsSafeConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c *holder
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			c = newHolder(h.bus, "c", events.EventTypeConfigValidated)
			if err := errors.Join(h.m.AddLeaderOnly(c), h.m.AddReplayer("config", cfgR)); err != nil {
				t.Fatal(err)
			}
		})
		ev := events.NewConfigValidatedEvent(&config.Config{}, "v", "test")
		h.bus.Publish(ev)
		cfgR.Cache(ev)
		stop := make(chan struct{})
		polled := make(chan int)
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					polled <- n
					return
				default:
				}
				s := h.m.Status()
				if s.Leading && s.Term == 0 {
					t.Error("leading without a term")
				}
				n++
				runtime.Gosched()
			}
		}()
		for term := uint64(1); term <= 20; term++ {
			h.lead(term)
			h.awaitReady(term)
			h.lose(term, "test")
			h.awaitStopped(term)
		}
		close(stop)
		if n := <-polled; n == 0 {
			t.Error("Status never polled")
		}
	})
}

// lazyContext reports itself over through Err as soon as over is set, before
// its Done channel closes, like the elector's term context after a pause.
type lazyContext struct {
	context.Context
	over func() bool
}

func (c lazyContext) Err() error {
	if c.over() {
		return context.Canceled
	}
	return c.Context.Err()
}

func TestTermContextFollowsSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srcCtx, srcCancel := context.WithCancel(context.Background())
		defer srcCancel()
		var over atomic.Bool
		src := lazyContext{Context: srcCtx, over: over.Load}
		var asked []uint64
		ctxs := make(chan context.Context, 1)
		c := funcComponent{name: "writer", fn: func(ctx context.Context) error {
			lifecycle.Subscribed(ctx)
			ctxs <- ctx
			<-ctx.Done()
			return ctx.Err()
		}}
		h := newHarness(t, lifecycle.Options{TermContext: func(term uint64) (context.Context, bool) {
			asked = append(asked, term)
			return src, term == 1
		}}, func(h *harness) {
			if err := h.m.AddLeaderOnly(c); err != nil {
				t.Fatal(err)
			}
		})
		h.lead(1)
		ctx := <-ctxs
		if ctx.Err() != nil {
			t.Fatal("term context over at start")
		}
		over.Store(true) // the source's clock says the term is over
		if ctx.Err() == nil {
			t.Fatal("term context does not report the source's end")
		}
		srcCancel() // the source's timer runs: Done closes, the component returns
		synctest.Wait()
		if cs := mustStatus(t, h.m.Status(), "writer"); cs.State != lifecycle.StateStopped {
			t.Errorf("writer %+v, want a clean stop", cs)
		}
		h.lose(1, "test")
		h.awaitStopped(1)
		h.lead(2) // no source for term 2: logged, the term still runs
		ctx = <-ctxs
		if ctx.Err() != nil {
			t.Error("term 2 context over")
		}
		if !slices.Equal(asked, []uint64{1, 2}) {
			t.Errorf("TermContext asked for %v", asked)
		}
		if h.logs.count("no source context for the term", "term=2") != 1 {
			t.Error("missing source not logged")
		}
	})
}

// TestDoneWaitsForLeaderOnlyRuns: Done closes once Run returned and every
// leader-only run returned, also one that overstayed the last term past
// Run's return, and not before; the Manager leaves no goroutine behind
// (the bubble would not end otherwise), idle ones included.
func TestDoneWaitsForLeaderOnlyRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stubborn, quick *holder
		h := newHarness(t, lifecycle.Options{StopTimeout: time.Second}, func(h *harness) {
			stubborn = newHolder(h.bus, "stubborn")
			quick = newHolder(h.bus, "quick")
			for _, err := range []error{h.m.AddLeaderOnly(stubborn), h.m.AddLeaderOnly(quick)} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		for term := uint64(1); term <= 3; term++ {
			h.lead(term)
			h.awaitReady(term)
			h.lose(term, "test")
			h.awaitStopped(term)
		}
		stubborn.stopDelay = 10 * time.Second // the Manager reads it in no other goroutine: term 3 ended
		h.lead(4)
		h.awaitReady(4)
		stoppedAt := time.Now()
		h.cancel()
		if err := <-h.runErr; err != nil {
			t.Fatalf("Run = %v", err)
		}
		h.cancel = nil // h.stop would wait for Done
		if got := time.Since(stoppedAt); got != time.Second {
			t.Errorf("Run returned %v after the stop, want StopTimeout (1s)", got)
		}
		synctest.Wait()
		if isClosed(h.m.Done()) {
			t.Fatal("Done closed while a leader-only run still runs")
		}
		<-h.m.Done()
		if got := time.Since(stoppedAt); got != 10*time.Second {
			t.Errorf("Done closed %v after the stop, want when the overstaying run returned (10s)", got)
		}
		if got := stubborn.startedTerms(); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
			t.Errorf("stubborn started in terms %v", got)
		}
		h.bus.Stop()
	})
}
