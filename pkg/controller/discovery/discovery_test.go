package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/events"
	busevents "github.com/baton-dev/baton/pkg/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

type rig struct {
	bus *busevents.EventBus
	d   *discovery.Discovery
	ch  <-chan busevents.Event
}

func newRig(t *testing.T, d func(*busevents.EventBus) (*discovery.Discovery, error)) *rig {
	t.Helper()
	bus := busevents.NewEventBusWithLogger(64, discard)
	disc, err := d(bus)
	if err != nil {
		t.Fatal(err)
	}
	ch := busevents.Subscribe[busevents.Event](context.Background(), bus, "test", 64, busevents.Types(events.EventTypeHAProxyPodsDiscovered))
	bus.Start()
	t.Cleanup(bus.Stop)
	return &rig{bus: bus, d: disc, ch: ch}
}

func (r *rig) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.d.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
}

func (r *rig) pending() []*events.HAProxyPodsDiscoveredEvent {
	synctest.Wait()
	var out []*events.HAProxyPodsDiscoveredEvent
	for {
		select {
		case e := <-r.ch:
			out = append(out, e.(*events.HAProxyPodsDiscoveredEvent))
		default:
			return out
		}
	}
}

func (r *rig) one(t *testing.T) *events.HAProxyPodsDiscoveredEvent {
	t.Helper()
	evs := r.pending()
	if len(evs) != 1 {
		t.Fatalf("got %d events, want 1: %+v", len(evs), evs)
	}
	return evs[0]
}

func names(pods []config.Pod) string {
	var s []string
	for _, p := range pods {
		r := "-"
		if p.Ready {
			r = "+"
		}
		s = append(s, p.Namespace+"/"+p.Name+r)
	}
	return strings.Join(s, ",")
}

func pod(name, ip string, ready bool) config.Pod {
	return config.Pod{Namespace: "lb", Name: name, IP: ip, Ready: ready}
}

func TestSimulated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(bus *busevents.EventBus) (*discovery.Discovery, error) {
			return discovery.NewSimulated(bus, []config.Pod{pod("b", "10.0.0.2", true), pod("a", "10.0.0.1", true)}, discovery.Options{Logger: discard})
		})
		if r.d.Synced() {
			t.Error("Synced before Start")
		}
		r.run(t)
		e := r.one(t)
		if e.Generation != 1 || names(e.Pods) != "lb/a+,lb/b+" {
			t.Fatalf("first event: generation %d pods %s", e.Generation, names(e.Pods))
		}
		if !r.d.Synced() {
			t.Error("not Synced after the first set")
		}

		if err := r.d.SetPod(pod("b", "10.0.0.2", false)); err != nil {
			t.Fatal(err)
		}
		if e := r.one(t); e.Generation != 2 || names(e.Pods) != "lb/a+,lb/b-" {
			t.Errorf("after SetPod: generation %d pods %s", e.Generation, names(e.Pods))
		}
		// The same pod again changes nothing.
		r.d.SetPod(pod("b", "10.0.0.2", false))
		if evs := r.pending(); len(evs) != 0 {
			t.Errorf("an unchanged set was published: %+v", evs)
		}
		if err := r.d.RemovePod("lb", "a"); err != nil {
			t.Fatal(err)
		}
		// The no-op SetPod counted a version, as any write does; the
		// generation skips it.
		if e := r.one(t); e.Generation != 4 || names(e.Pods) != "lb/b-" {
			t.Errorf("after RemovePod: generation %d pods %s", e.Generation, names(e.Pods))
		}
		if err := r.d.RemovePod("lb", "a"); !errors.Is(err, discovery.ErrPodNotFound) {
			t.Errorf("second RemovePod = %v, want ErrPodNotFound", err)
		}
		if err := r.d.SetPods(nil); err != nil {
			t.Fatal(err)
		}
		if e := r.one(t); e.Generation != 5 || len(e.Pods) != 0 {
			t.Errorf("after SetPods(nil): generation %d pods %s", e.Generation, names(e.Pods))
		}
		cur, ok := r.d.Current()
		if !ok || cur.Generation != 5 {
			t.Errorf("Current = %+v", cur)
		}
	})
}

// TestBurstCoalesces: changes made while Start's goroutine cannot run give
// one event with the newest set, and generations only grow.
func TestBurstCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(bus *busevents.EventBus) (*discovery.Discovery, error) {
			return discovery.NewSimulated(bus, nil, discovery.Options{Logger: discard})
		})
		r.run(t)
		r.one(t)
		for i := range 100 {
			r.d.SetPod(pod(fmt.Sprintf("p%03d", i), fmt.Sprintf("10.0.1.%d", i), true))
		}
		evs := r.pending()
		if len(evs) == 0 || len(evs) > 100 {
			t.Fatalf("%d events for 100 changes", len(evs))
		}
		last := evs[len(evs)-1]
		if len(last.Pods) != 100 {
			t.Errorf("newest event holds %d pods, want 100", len(last.Pods))
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Generation <= evs[i-1].Generation {
				t.Errorf("generations %d then %d", evs[i-1].Generation, evs[i].Generation)
			}
		}
		if last.Generation != 101 {
			t.Errorf("last generation %d, want 101: one up per change of the set", last.Generation)
		}
		t.Logf("100 changes gave %d events", len(evs))
	})
}

func TestReplayToLateSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(bus *busevents.EventBus) (*discovery.Discovery, error) {
			return discovery.NewSimulated(bus, []config.Pod{pod("a", "10.0.0.1", true)}, discovery.Options{Logger: discard})
		})
		r.run(t)
		r.pending()
		r.d.SetPod(pod("c", "10.0.0.3", true))
		r.pending()
		late := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), r.bus, "leader", 4, busevents.Types(events.EventTypeHAProxyPodsDiscovered))
		if !r.d.Replayer().Replay() {
			t.Fatal("nothing to replay")
		}
		synctest.Wait()
		e := (<-late).(*events.HAProxyPodsDiscoveredEvent)
		if e.Generation != 2 || names(e.Pods) != "lb/a+,lb/c+" {
			t.Errorf("replayed generation %d pods %s", e.Generation, names(e.Pods))
		}
	})
}

func TestEventPodsAreACopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(bus *busevents.EventBus) (*discovery.Discovery, error) {
			return discovery.NewSimulated(bus, []config.Pod{pod("a", "10.0.0.1", true)}, discovery.Options{Logger: discard})
		})
		r.run(t)
		e := r.one(t)
		r.d.SetPod(pod("a", "10.0.0.9", true))
		r.one(t)
		if e.Pods[0].IP != "10.0.0.1" {
			t.Error("a published event changed afterwards")
		}
	})
}

func TestInputChecks(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(1, discard)
	cs := fake.NewClientset()
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"bus", func() error { _, err := discovery.NewSimulated(nil, nil, discovery.Options{}); return err }, "discovery: bus is nil"},
		{"namespace", func() error {
			_, err := discovery.NewSimulated(bus, []config.Pod{{Name: "a"}}, discovery.Options{})
			return err
		}, "discovery: invalid pod: pods[0].namespace: must not be empty"},
		{"name", func() error {
			_, err := discovery.NewSimulated(bus, []config.Pod{pod("a", "", false), {Namespace: "lb"}}, discovery.Options{})
			return err
		}, "discovery: invalid pod: pods[1].name: must not be empty"},
		{"ip", func() error {
			_, err := discovery.NewSimulated(bus, []config.Pod{pod("a", "10.0.0.300", false)}, discovery.Options{})
			return err
		}, `discovery: invalid pod: pods[0].ip: "10.0.0.300" is not an IP address`},
		{"duplicate", func() error {
			_, err := discovery.NewSimulated(bus, []config.Pod{pod("a", "", false), pod("b", "", false), pod("a", "", true)}, discovery.Options{})
			return err
		}, "discovery: invalid pod: pods[2]: duplicate pod lb/a (also pods[0])"},
		{"check pods", func() error {
			if err := discovery.CheckPods([]config.Pod{pod("a", "10.0.0.1", true), pod("b", "", false)}); err != nil {
				return fmt.Errorf("a good set refused: %w", err)
			}
			return discovery.CheckPods([]config.Pod{pod("a", "", false), pod("a", "", true)})
		}, "discovery: invalid pod: pods[1]: duplicate pod lb/a (also pods[0])"},
		{"clientset", func() error { _, err := discovery.NewCluster(bus, nil, "ns", "app=x", discovery.Options{}); return err }, "discovery: clientset is nil"},
		{"cluster namespace", func() error { _, err := discovery.NewCluster(bus, cs, "", "app=x", discovery.Options{}); return err }, `discovery: namespace ""`},
		{"empty selector", func() error { _, err := discovery.NewCluster(bus, cs, "ns", " ", discovery.Options{}); return err }, "discovery: label selector is empty"},
		{"bad selector", func() error {
			_, err := discovery.NewCluster(bus, cs, "ns", "app in (x", discovery.Options{})
			return err
		}, `discovery: label selector "app in (x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
	d, _ := discovery.NewSimulated(bus, nil, discovery.Options{})
	if err := d.SetPod(config.Pod{Namespace: "lb"}); !errors.Is(err, discovery.ErrInvalidPod) {
		t.Errorf("SetPod(no name) = %v", err)
	}
	if err := d.SetPods([]config.Pod{pod("a", "x", true)}); !errors.Is(err, discovery.ErrInvalidPod) {
		t.Errorf("SetPods(bad ip) = %v", err)
	}
	c, _ := discovery.NewCluster(bus, cs, "ns", "app=x", discovery.Options{})
	for _, err := range []error{c.SetPod(pod("a", "", true)), c.SetPods(nil), c.RemovePod("lb", "a")} {
		if !errors.Is(err, discovery.ErrNotSimulated) {
			t.Errorf("simulated setter on a cluster discovery = %v, want ErrNotSimulated", err)
		}
	}
}

func TestStartTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(bus *busevents.EventBus) (*discovery.Discovery, error) {
			return discovery.NewSimulated(bus, nil, discovery.Options{Logger: discard})
		})
		r.run(t)
		synctest.Wait()
		if err := r.d.Start(t.Context()); !errors.Is(err, discovery.ErrAlreadyStarted) {
			t.Errorf("second Start = %v", err)
		}
	})
}

func ExampleDiscovery_SetPod() {
	bus := busevents.NewEventBusWithLogger(16, discard)
	d, _ := discovery.NewSimulated(bus, []config.Pod{{Namespace: "lb", Name: "haproxy-0", IP: "10.0.0.10", Ready: true}}, discovery.Options{Logger: discard})
	ch := busevents.Subscribe[*events.HAProxyPodsDiscoveredEvent](context.Background(), bus, "example", 16)
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Start(ctx) }()

	e := <-ch
	fmt.Println(e.Generation, names(e.Pods))
	d.SetPod(config.Pod{Namespace: "lb", Name: "haproxy-1", IP: "10.0.0.11"})
	e = <-ch
	fmt.Println(e.Generation, names(e.Pods))

	cancel()
	<-done
	bus.Stop()
	// Output:
	// 1 lb/haproxy-0+
	// 2 lb/haproxy-0+,lb/haproxy-1-
}

func BenchmarkPublish100Pods(b *testing.B) { benchmarkPublish(b, 100) }

// BenchmarkPublish1Pod is the baseline: the fixed cost of a change.
func BenchmarkPublish1Pod(b *testing.B) { benchmarkPublish(b, 1) }

func benchmarkPublish(b *testing.B, n int) {
	bus := busevents.NewEventBusWithLogger(16, discard)
	pods := make([]config.Pod, n)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("p%04d", i), "10.0.0.1", true)
	}
	d, _ := discovery.NewSimulated(bus, pods, discovery.Options{Logger: discard})
	ch := busevents.Subscribe[*events.HAProxyPodsDiscoveredEvent](context.Background(), bus, "bench", 1, busevents.LatestValue(events.EventTypeHAProxyPodsDiscovered))
	bus.Start()
	defer bus.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Start(ctx) }()
	defer func() { cancel(); <-done }()
	<-ch
	b.ReportAllocs()
	ready := pods[0].Ready
	for b.Loop() {
		ready = !ready
		pods[0].Ready = ready
		d.SetPod(pods[0])
		e := <-ch
		if slices.IndexFunc(e.Pods, func(p config.Pod) bool { return p.Name == pods[0].Name && p.Ready == ready }) < 0 {
			b.Fatal("stale event")
		}
	}
}
