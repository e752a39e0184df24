package app_test

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/leaderelection"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection/leaderelectiontest"
)

// BenchmarkTermReady measures, end to end in embedded mode, the time from
// the acquisition of the lease (the BecameLeaderEvent's timestamp) to the
// moment every leader-only component holds the current state (the
// runtime's term-ready report), over real terms: each iteration clears the
// lease's holder by hand, the elector steps down, campaigns again and wins
// a new term. It reports the median, 90th and 99th percentiles and the
// maximum of that latency, and the heap allocations per term
// (allocs/term, every goroutine of the process, the lease store's included).
//
//   - replica: the whole replica of package app (ConfigPublisher,
//     DeploymentScheduler and Coordinator, fed by the ConfigChangeHandler's
//     and the Discovery's replays);
//   - runtime-only (baseline, same run): the same elector, bus and runtime
//     with no leader-only component and no replayer, so the term is ready
//     as soon as the runtime has handled the BecameLeaderEvent.
//
// ns/op is the whole cycle (step-down, new campaign, term start).
func BenchmarkTermReady(b *testing.B) {
	prev := slog.Default()
	slog.SetDefault(discard)
	b.Cleanup(func() { slog.SetDefault(prev) })

	b.Run("replica", func(b *testing.B) {
		w, err := app.NewEmbedded(app.EmbeddedOptions{Config: configDoc(2000), Pods: pods(1, 10)})
		if err != nil {
			b.Fatal(err)
		}
		ready := make(chan lifecycle.TermReport, 1)
		opts := w.Options("bench")
		opts.Logger = discard
		opts.Hooks.OnTermReady = func(r lifecycle.TermReport) { ready <- r }
		r, err := app.New(opts)
		if err != nil {
			b.Fatal(err)
		}
		cycle(b, w.Leases, r.Run, ready)
		want := version(b, configDoc(2000))
		if st := r.Publisher().State(); st.ConfigVersion != want || !st.HasPods {
			b.Errorf("publisher state %+v, want config %s and pods", st, want)
		}
		if st := r.Coordinator().Status(); st.ConfigVersion != want || !st.HasPods {
			b.Errorf("coordinator status %+v", st)
		}
	})

	b.Run("runtime-only", func(b *testing.B) {
		leases, run, ready := runtimeOnly(b)
		cycle(b, leases, run, ready)
	})
}

// runtimeOnly returns the baseline of BenchmarkTermReady: an elector, a bus and a runtime with no leader-only
// component and no replayer, whose term is ready as soon as the runtime has
// handled the BecameLeaderEvent.
func runtimeOnly(tb testing.TB) (*k8sle.MemoryStore, func(context.Context) error, chan lifecycle.TermReport) {
	tb.Helper()
	leases := k8sle.NewMemoryStore("bench")
	bus := busevents.NewEventBusWithLogger(0, discard)
	le, err := leaderelection.NewWithStore(k8sle.Config{
		Identity: "bench", LeaseName: "bench", LeaseNamespace: "embedded", ReleaseOnCancel: true,
	}, leases, bus, leaderelection.Callbacks{}, discard)
	if err != nil {
		tb.Fatal(err)
	}
	ready := make(chan lifecycle.TermReport, 1)
	m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: discard, TermContext: le.TermContext,
		OnTermReady: func(r lifecycle.TermReport) { ready <- r }})
	if err != nil {
		tb.Fatal(err)
	}
	if err := m.AddAllReplica(le); err != nil {
		tb.Fatal(err)
	}
	run := func(ctx context.Context) error {
		bus.Start()
		defer bus.Stop()
		return m.Run(ctx)
	}
	return leases, run, ready
}

// TestTermAllocationBudget guards against leaks, coarsely: a whole
// replica's term (step-down, campaign, term start, replays, render,
// publish, ready; every goroutine of the process counted) stays within a
// budget of heap allocations a few times what it costs, with or without
// the race detector. It is no target: what users feel is the term-ready
// latency (BenchmarkTermReady), not allocations.
func TestTermAllocationBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count: not in -short")
	}
	prev := slog.Default()
	slog.SetDefault(discard)
	t.Cleanup(func() { slog.SetDefault(prev) })
	w, err := app.NewEmbedded(app.EmbeddedOptions{Config: configDoc(2000), Pods: pods(1, 10)})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan lifecycle.TermReport, 1)
	opts := w.Options("alloc")
	opts.Logger = discard
	opts.Hooks.OnTermReady = func(r lifecycle.TermReport) { ready <- r }
	r, err := app.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	const budget = 300
	n := termAllocs(t, w.Leases, r.Run, ready)
	t.Logf("%.1f allocations per term", n)
	if n > budget {
		t.Errorf("a term of the replica costs %.1f allocations, over the budget of %d", n, budget)
	}
}

// termAllocs runs run and returns the heap allocations per term it makes,
// terms made by clearing the lease's holder, after 20 terms of warm-up
// (the first terms render once).
func termAllocs(t *testing.T, leases *k8sle.MemoryStore, run func(context.Context) error, ready <-chan lifecycle.TermReport) float64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	// One timer, reset per term: a time.After per term would count the
	// harness's own allocations as the replica's.
	timeout := time.NewTimer(time.Hour)
	defer timeout.Stop()
	term := func() {
		rec, err := leases.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec.HolderIdentity = ""
		timeout.Reset(10 * time.Second)
		leaderelectiontest.Set(leases, rec)
		select {
		case <-ready:
		case <-timeout.C:
			t.Fatal("no new term within 10s")
		}
	}
	<-ready
	for range 20 {
		term()
	}
	return testing.AllocsPerRun(200, term)
}

// cycle runs run, waits for the first term, then makes b.N more terms by
// clearing the lease's holder, collecting each term-ready latency.
func cycle(b *testing.B, leases *k8sle.MemoryStore, run func(context.Context) error, ready <-chan lifecycle.TermReport) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("run: %v", err)
		}
	}()
	timeout := time.After(10 * time.Second)
	select {
	case <-ready:
	case <-timeout:
		b.Fatal("no first term")
	}
	// Let the all-replica side publish its first state before measuring.
	time.Sleep(50 * time.Millisecond)

	lat := make([]time.Duration, 0, b.N)
	// One timer, reset per term: a time.After per term would count the
	// harness's own allocations as the term's.
	termTimeout := time.NewTimer(time.Hour)
	defer termTimeout.Stop()
	b.ReportAllocs()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	b.ResetTimer()
	for range b.N {
		rec, err := leases.Get(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		rec.HolderIdentity = ""
		termTimeout.Reset(10 * time.Second)
		leaderelectiontest.Set(leases, rec) // the elector sees its lease taken away, steps down and wins it back
		select {
		case r := <-ready:
			lat = append(lat, r.Latency)
		case <-termTimeout.C:
			b.Fatal("no new term within 10s")
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Mallocs-mallocs)/float64(len(lat)), "allocs/term")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "ready-p50-ns")
	b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds()), "ready-p90-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "ready-p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "ready-max-ns")
}
