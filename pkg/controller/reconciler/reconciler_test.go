package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.DiscardHandler)

func testConfig(version string) *events.ConfigValidatedEvent {
	cfg := &config.Config{
		Frontends: []config.Frontend{{Name: "web", Bind: ":80", DefaultBackend: "app"}},
		Backends:  []config.Backend{{Name: "app", Port: 8080}},
	}
	return events.NewConfigValidatedEvent(cfg, version, "test")
}

// testPods returns generation gen: n ready pods whose IPs name the
// generation, 10.<gen>.0.<i>.
func testPods(gen uint64, n int) *events.HAProxyPodsDiscoveredEvent {
	pods := make([]config.Pod, n)
	for i := range pods {
		pods[i] = config.Pod{Namespace: "ns", Name: fmt.Sprintf("p%d", i), IP: fmt.Sprintf("10.%d.0.%d", gen, i+1), Ready: true}
	}
	return events.NewHAProxyPodsDiscoveredEvent(pods, gen)
}

func subscribeTriggers(bus *busevents.EventBus) <-chan *events.ReconciliationTriggeredEvent {
	return busevents.Subscribe[*events.ReconciliationTriggeredEvent](context.Background(), bus, "test-triggers", 1024)
}

// startReconciler starts r and returns a stop that waits for it and
// returns its error.
func startReconciler(t *testing.T, r *reconciler.Reconciler) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

func TestReconcilerOptions(t *testing.T) {
	bus := newBus(t)
	tests := []struct {
		opts reconciler.ReconcilerOptions
		want string
	}{
		{reconciler.ReconcilerOptions{Debounce: -1}, "reconciler: invalid options: debounce -1ns is negative"},
		{reconciler.ReconcilerOptions{MaxDelay: -1}, "reconciler: invalid options: maxDelay -1ns is negative"},
		{reconciler.ReconcilerOptions{Buffer: -1}, "reconciler: invalid options: buffer -1 is negative"},
		{reconciler.ReconcilerOptions{Debounce: time.Second, MaxDelay: time.Millisecond}, "reconciler: invalid options: maxDelay 1ms is shorter than debounce 1s"},
	}
	for _, tt := range tests {
		_, err := reconciler.NewReconciler(bus, tt.opts)
		if err == nil || err.Error() != tt.want || !errors.Is(err, reconciler.ErrInvalidOptions) {
			t.Errorf("NewReconciler(%+v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
	r, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Debounce: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if o := r.Options(); o.Debounce != 2*time.Second || o.MaxDelay != 2*time.Second || o.Buffer != reconciler.DefaultBuffer || o.Logger == nil {
		t.Errorf("defaults: %+v", o)
	}
	if _, err := reconciler.NewReconciler(nil, reconciler.ReconcilerOptions{}); !errors.Is(err, reconciler.ErrNilBus) {
		t.Errorf("nil bus: %v", err)
	}
	bus.Start()
	if _, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{}); !errors.Is(err, reconciler.ErrBusStarted) {
		t.Errorf("started bus: %v", err)
	}
}

// TestDebounceBurst: a burst of changes, each closer than Debounce to the
// last, gives one trigger, Debounce after the last change.
func TestDebounceBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		r, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Debounce: 100 * time.Millisecond, MaxDelay: time.Second, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		triggers := subscribeTriggers(bus)
		bus.Start()
		stop := startReconciler(t, r)

		start := time.Now()
		for i := range 20 {
			if i%2 == 0 {
				bus.Publish(testConfig(fmt.Sprintf("v%d", i)))
			} else {
				bus.Publish(testPods(uint64(i), 1))
			}
			time.Sleep(20 * time.Millisecond)
		}
		last := start.Add(19 * 20 * time.Millisecond)
		synctest.Wait()
		if got := eventstest.Drain(triggers); len(got) != 0 {
			t.Fatalf("trigger before the burst went quiet: %v", got[0].Reason)
		}
		time.Sleep(time.Second)
		got := eventstest.Drain(triggers)
		if len(got) != 1 {
			t.Fatalf("%d triggers for a burst, want 1", len(got))
		}
		if at := got[0].Timestamp(); !at.Equal(last.Add(100 * time.Millisecond)) {
			t.Errorf("trigger at +%s, want +%s (debounce after the last change)", at.Sub(start), last.Add(100*time.Millisecond).Sub(start))
		}
		if want := `inputs changed (20 changes): config "v18", pods generation 19`; got[0].Reason != want {
			t.Errorf("reason %q, want %q", got[0].Reason, want)
		}
		if st := r.Stats(); st.Changes != 20 || st.Debounced != 1 || st.Pending {
			t.Errorf("stats %+v", st)
		}
		if err := stop(); err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
}

// TestDebounceMaxDelay: a stream of changes that never goes quiet still
// gives a trigger at most MaxDelay after the first change it covers.
func TestDebounceMaxDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		r, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Debounce: 100 * time.Millisecond, MaxDelay: time.Second, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		triggers := subscribeTriggers(bus)
		bus.Start()
		stop := startReconciler(t, r)
		defer stop()

		// One change every 30ms, from 0 to 3000ms: 101 changes.
		start := time.Now()
		for i := range 101 {
			bus.Publish(testPods(uint64(i+1), 1))
			if i < 100 {
				time.Sleep(30 * time.Millisecond)
			}
		}
		time.Sleep(time.Second)
		got := eventstest.Drain(triggers)
		// Windows open at the first change after a trigger: 0, 1020, 2040ms;
		// each fires MaxDelay later, the last one when that comes first.
		want := []time.Duration{1000 * time.Millisecond, 2020 * time.Millisecond, 3040 * time.Millisecond}
		var at []time.Duration
		for _, e := range got {
			at = append(at, e.Timestamp().Sub(start))
		}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Fatalf("triggers at %v, want %v", at, want)
		}
		for i, wantN := range []int{34, 34, 33} {
			if !strings.Contains(got[i].Reason, fmt.Sprintf("(%d changes)", wantN)) {
				t.Errorf("trigger %d reason %q, want %d changes", i, got[i].Reason, wantN)
			}
		}
	})
}

// TestUnchangedIgnored: a repeated version or generation is not a change,
// so the replays of a new term do not cause a second trigger.
func TestUnchangedIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		r, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		cfgReplayer := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
		triggers := subscribeTriggers(bus)
		bus.Start()
		stop := startReconciler(t, r)
		defer stop()

		cfg := testConfig("v1")
		bus.Publish(cfg)
		cfgReplayer.Cache(cfg) // stamped after the publish: its replay reaches the reconciler
		time.Sleep(time.Second)
		if n := len(eventstest.Drain(triggers)); n != 1 {
			t.Fatalf("%d triggers for one change, want 1", n)
		}
		cfgReplayer.Replay()
		bus.Publish(testConfig("v1"))
		time.Sleep(time.Second)
		if n := len(eventstest.Drain(triggers)); n != 0 {
			t.Errorf("%d triggers for repeats of v1, want 0", n)
		}
		if st := r.Stats(); st.Changes != 1 || st.Unchanged != 2 {
			t.Errorf("stats %+v, want 1 change and 2 unchanged", st)
		}
	})
}

func TestTriggerNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		r, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		triggers := subscribeTriggers(bus)
		bus.Start()
		start := time.Now()
		r.TriggerNow(7) // needs no running Start
		got := eventstest.Drain(triggers)
		if len(got) != 1 || got[0].Reason != reconciler.ReasonBecameLeader || !got[0].Timestamp().Equal(start) {
			t.Fatalf("TriggerNow published %v", got)
		}
		if st := r.Stats(); st.Immediate != 1 || st.Debounced != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestReconcilerStartOnceAndBusStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := busevents.NewEventBusWithLogger(0, discard)
		r, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		bus.Start()
		done := make(chan error, 1)
		go func() { done <- r.Start(context.Background()) }()
		synctest.Wait()
		if err := r.Start(context.Background()); !errors.Is(err, reconciler.ErrAlreadyRunning) {
			t.Errorf("second Start = %v", err)
		}
		bus.Stop()
		if err := <-done; !errors.Is(err, reconciler.ErrSubscriptionClosed) {
			t.Errorf("Start after bus.Stop = %v, want ErrSubscriptionClosed", err)
		}
	})
}

// newBus returns a bus that logs nowhere and is stopped when the test ends.
func newBus(t *testing.T) *busevents.EventBus {
	b := busevents.NewEventBusWithLogger(0, discard)
	t.Cleanup(b.Stop)
	return b
}
