package deploymentscheduler_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/deploymentscheduler"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// rig runs the scheduler under a real runtime; the test plays the
// all-replica side by publishing state events itself.
type rig struct {
	bus   *busevents.EventBus
	m     *lifecycle.Manager
	s     *deploymentscheduler.Component
	deps  <-chan busevents.Event
	ready <-chan lifecycle.TermReport
}

func newRig(t *testing.T, opts deploymentscheduler.Options) *rig {
	t.Helper()
	bus := busevents.NewEventBusWithLogger(64, discard)
	ready := make(chan lifecycle.TermReport, 8)
	m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: discard, OnTermReady: func(r lifecycle.TermReport) { ready <- r }})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = discard
	}
	s, err := deploymentscheduler.New(bus, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddLeaderOnly(s); err != nil {
		t.Fatal(err)
	}
	deps := busevents.Subscribe[busevents.Event](context.Background(), bus, "test-deployments", 64, busevents.Types(events.EventTypeDeploymentScheduled))
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
		bus.Stop()
	})
	return &rig{bus: bus, m: m, s: s, deps: deps, ready: ready}
}

func (r *rig) publish(e busevents.Event) {
	r.bus.Publish(e)
	synctest.Wait()
}

func (r *rig) deployments(t *testing.T) []*events.DeploymentScheduledEvent {
	t.Helper()
	synctest.Wait()
	var out []*events.DeploymentScheduledEvent
	for {
		select {
		case e := <-r.deps:
			out = append(out, e.(*events.DeploymentScheduledEvent))
		default:
			return out
		}
	}
}

func cfg(version string) *events.ConfigValidatedEvent {
	return events.NewConfigValidatedEvent(config.Default(), version, "test")
}

func pods(gen uint64, n int) *events.HAProxyPodsDiscoveredEvent {
	ps := make([]config.Pod, n)
	for i := range ps {
		ps[i] = config.Pod{Namespace: "lb", Name: string(rune('a' + i)), IP: "10.0.0.1", Ready: i%2 == 0}
	}
	return events.NewHAProxyPodsDiscoveredEvent(ps, gen)
}

func TestHoldsUntilBothThenRateLimitsAndCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, deploymentscheduler.Options{MinInterval: 2 * time.Second})
		r.publish(events.NewBecameLeaderEvent("me", 5))
		r.publish(cfg("v1"))
		if d := r.deployments(t); len(d) != 0 || r.m.Status().TermReady {
			t.Fatalf("deployed (%d) or ready with a configuration only", len(d))
		}
		start := time.Now()
		r.publish(pods(1, 3))
		d := r.deployments(t)
		if len(d) != 1 || d[0].Term != 5 || d[0].Sequence != 1 || d[0].ConfigVersion != "v1" || d[0].PodGeneration != 1 ||
			d[0].Pods != 3 || d[0].ReadyPods != 2 || d[0].Coalesced != 1 {
			t.Fatalf("first deployment: %+v", d)
		}
		if len(r.ready) != 1 {
			t.Error("no term-ready report once both were held")
		}

		// A burst within the interval: held back, then one deployment.
		time.Sleep(500 * time.Millisecond)
		r.publish(pods(2, 3))
		time.Sleep(500 * time.Millisecond)
		r.publish(pods(3, 4))
		r.publish(cfg("v2"))
		st := r.s.State()
		if !st.Pending || st.PendingChanges != 3 || !st.DueAt.Equal(start.Add(2*time.Second)) {
			t.Errorf("state during the wait: %+v", st)
		}
		time.Sleep(time.Second - time.Nanosecond)
		if d := r.deployments(t); len(d) != 0 {
			t.Fatalf("deployed before the interval: %+v", d)
		}
		time.Sleep(time.Nanosecond)
		d = r.deployments(t)
		if len(d) != 1 || d[0].Sequence != 2 || d[0].ConfigVersion != "v2" || d[0].PodGeneration != 3 || d[0].Coalesced != 3 {
			t.Fatalf("coalesced deployment: %+v", d)
		}
		if time.Since(start) != 2*time.Second {
			t.Errorf("second deployment %v after the first, want 2s", time.Since(start))
		}

		// A change and its undoing within the interval cancel out.
		r.publish(cfg("v3"))
		r.publish(cfg("v2"))
		time.Sleep(5 * time.Second)
		if d := r.deployments(t); len(d) != 0 {
			t.Errorf("deployed although back to what is deployed: %+v", d)
		}
		h := r.s.History()
		if len(h) != 2 || h[1].ConfigVersion != "v2" || h[1].Coalesced != 3 {
			t.Errorf("history %+v", h)
		}
		if st := r.s.State(); st.Pending || st.Deployments != 2 || st.Last.Sequence != 2 {
			t.Errorf("final state %+v", st)
		}
	})
}

func TestLostLeadershipClearsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, deploymentscheduler.Options{MinInterval: 10 * time.Second})
		r.publish(events.NewBecameLeaderEvent("me", 1))
		r.publish(cfg("v1"))
		r.publish(pods(1, 1))
		r.deployments(t)
		r.publish(pods(2, 2))
		if st := r.s.State(); !st.Pending {
			t.Fatalf("nothing pending: %+v", st)
		}
		r.publish(events.NewLostLeadershipEvent("me", 1, "test"))
		st := r.s.State()
		if st.Pending || st.Cleared != 1 || st.Running {
			t.Errorf("after losing leadership: %+v", st)
		}
		time.Sleep(time.Minute)
		if d := r.deployments(t); len(d) != 0 {
			t.Errorf("deployed after losing leadership: %+v", d)
		}

		// The next term starts afresh: no limiter carried over, and the
		// current state deploys at once, even if it was deployed before.
		r.publish(events.NewBecameLeaderEvent("me", 2))
		r.publish(cfg("v1"))
		r.publish(pods(2, 2))
		d := r.deployments(t)
		if len(d) != 1 || d[0].Term != 2 || d[0].Sequence != 1 || d[0].PodGeneration != 2 {
			t.Errorf("first deployment of term 2: %+v", d)
		}
		if h := r.s.History(); len(h) != 2 || h[0].Term != 1 || h[1].Term != 2 {
			t.Errorf("history across terms: %+v", h)
		}
	})
}

func TestFailedDeploymentIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		r := newRig(t, deploymentscheduler.Options{MinInterval: time.Second, Deploy: func(ctx context.Context, d deploymentscheduler.Deployment) error {
			calls++
			if calls == 1 {
				return errors.New("pods unreachable")
			}
			return nil
		}})
		r.publish(events.NewBecameLeaderEvent("me", 3))
		r.publish(cfg("v1"))
		r.publish(pods(1, 1))
		if d := r.deployments(t); len(d) != 0 || r.s.State().Failures != 1 || !r.s.State().Pending {
			t.Fatalf("after a failed deployment: %+v %+v", d, r.s.State())
		}
		r.publish(pods(2, 1))
		time.Sleep(time.Second)
		d := r.deployments(t)
		if len(d) != 1 || d[0].PodGeneration != 2 || d[0].Coalesced != 2 || calls != 2 {
			t.Errorf("retried deployment: %+v after %d calls", d, calls)
		}
	})
}

func TestHistoryIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, deploymentscheduler.Options{MinInterval: time.Second, HistorySize: 3})
		r.publish(events.NewBecameLeaderEvent("me", 1))
		r.publish(cfg("v1"))
		for g := uint64(1); g <= 5; g++ {
			r.publish(pods(g, 1))
			time.Sleep(time.Second)
		}
		synctest.Wait()
		h := r.s.History()
		if len(h) != 3 || h[0].PodGeneration != 3 || h[2].PodGeneration != 5 {
			t.Errorf("history %+v", h)
		}
	})
}

func TestStartOutsideATerm(t *testing.T) {
	s, _ := deploymentscheduler.New(busevents.NewEventBusWithLogger(1, discard), deploymentscheduler.Options{})
	if err := s.Start(t.Context()); !errors.Is(err, deploymentscheduler.ErrNoTerm) {
		t.Errorf("Start without a term = %v", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(1, discard)
	for _, tc := range []struct {
		bus  *busevents.EventBus
		opts deploymentscheduler.Options
		want string
	}{
		{nil, deploymentscheduler.Options{}, "deploymentscheduler: bus is nil"},
		{bus, deploymentscheduler.Options{MinInterval: -1}, "deploymentscheduler: options: min interval is negative"},
		{bus, deploymentscheduler.Options{HistorySize: -1}, "deploymentscheduler: options: history size is negative"},
	} {
		if _, err := deploymentscheduler.New(tc.bus, tc.opts); err == nil || err.Error() != tc.want {
			t.Errorf("New = %v, want %q", err, tc.want)
		}
	}
}
