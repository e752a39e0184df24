package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/metrics"
	busevents "github.com/baton-dev/baton/pkg/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Strict fakes: each returns exactly what the test set.

type fakeBus struct{ st busevents.Stats }

func (f *fakeBus) Stats() busevents.Stats { return f.st }

type fakeRuntime struct{ st lifecycle.Status }

func (f *fakeRuntime) Status() lifecycle.Status { return f.st }

type fakeElection struct {
	leader bool
	term   uint64
}

func (f *fakeElection) IsLeader() bool { return f.leader }
func (f *fakeElection) Term() uint64   { return f.term }

// configEvent stands in for an application's state event: the core's
// metrics know event types only by name.
type configEvent struct{}

const configType = "config.validated"

func (*configEvent) EventType() string    { return configType }
func (*configEvent) Timestamp() time.Time { return time.Time{} }

// gather returns every sample as "name{k=v,...}" -> value; histograms give
// name_count and name_sum.
func gather(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + labels(m)
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+labels(m)] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+labels(m)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labels(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func expect(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s missing", k)
			continue
		}
		if g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
}

func TestCollectorReadsSourcesAtScrapeTime(t *testing.T) {
	bus := &fakeBus{st: busevents.Stats{
		RejectedNil: 2, RejectedStopped: 3,
		Replayed: map[string]uint64{configType: 4},
		Totals: []busevents.SubscriberStats{
			{Name: "publisher", Delivered: map[string]uint64{"config.validated": 5}, Dropped: map[string]uint64{"pods.discovered": 1}, Skipped: map[string]uint64{"pods.discovered": 7}},
			// Two entries with one name are summed into one series.
			{Name: "observer", Delivered: map[string]uint64{"config.validated": 1}},
			{Name: "observer", Delivered: map[string]uint64{"config.validated": 2}},
		},
	}}
	rt := &fakeRuntime{st: lifecycle.Status{
		Running: true, Leading: true, Term: 9, TermReady: true,
		Terms: 3, ReadyTerms: 2, SubscribeTimeouts: 1, HookFailures: 4, LeadershipDropped: 5,
		MissingTerms: 6, StepDowns: 7, Missing: []string{"config-publisher"}, CampaignWaiting: true,
		Components: []lifecycle.ComponentStatus{
			{Name: "discovery", State: lifecycle.StateRunning, Starts: 1},
			{Name: "config-publisher", LeaderOnly: true, State: lifecycle.StateFailed, Starts: 3, Failures: 2, Overstays: 1, Panics: 1, Missing: true},
			{Name: "scheduler", LeaderOnly: true, State: lifecycle.StateRunning, Starts: 3},
		},
	}}
	el := &fakeElection{leader: true, term: 9}
	m, err := metrics.New(metrics.Sources{Bus: bus, Runtime: rt, Election: el}, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, gather(t, m.Registry()), map[string]float64{
		"baton_is_leader": 1,
		"baton_term":      9,
		"baton_leadership_transitions_total{transition=acquired}":               3,
		"baton_leadership_transitions_total{transition=lost}":                   2,
		"baton_terms_ready_total":                                               2,
		"baton_term_ready":                                                      1,
		"baton_replays_total{type=config.validated}":                            4,
		"baton_bus_rejected_total{reason=nil}":                                  2,
		"baton_bus_rejected_total{reason=stopped}":                              3,
		"baton_bus_delivered_total{subscriber=publisher,type=config.validated}": 5,
		"baton_bus_delivered_total{subscriber=observer,type=config.validated}":  3,
		"baton_bus_dropped_total{subscriber=publisher,type=pods.discovered}":    1,
		"baton_bus_skipped_total{subscriber=publisher,type=pods.discovered}":    7,
		"baton_component_up{component=discovery,leader_only=false}":             1,
		"baton_component_up{component=config-publisher,leader_only=true}":       0,
		"baton_component_failed{component=config-publisher,leader_only=true}":   1,
		"baton_component_failed{component=discovery,leader_only=false}":         0,
		"baton_component_starts_total{component=config-publisher}":              3,
		"baton_component_failures_total{component=config-publisher}":            2,
		"baton_component_overstays_total{component=config-publisher}":           1,
		"baton_runtime_subscribe_timeouts_total":                                1,
		"baton_runtime_hook_failures_total":                                     4,
		"baton_runtime_leadership_events_dropped_total":                         5,
		"baton_component_panics_total{component=config-publisher}":              1,
		"baton_component_missing{component=config-publisher}":                   1,
		"baton_component_missing{component=scheduler}":                          0,
		"baton_runtime_terms_missing_component_total":                           6,
		"baton_runtime_step_downs_total":                                        7,
		"baton_runtime_campaign_waiting":                                        1,
		"baton_term_ready_seconds_count":                                        0,
		"baton_handover_seconds_count":                                          0,
	})

	// A second scrape sees the sources as they are now: nothing is cached.
	el.leader, el.term = false, 0
	rt.st.Leading, rt.st.TermReady, rt.st.Terms = false, false, 3
	expect(t, gather(t, m.Registry()), map[string]float64{
		"baton_is_leader": 0,
		"baton_term":      0,
		"baton_leadership_transitions_total{transition=lost}": 3,
		"baton_term_ready": 0,
	})
}

func TestNilSourcesAreLeftOut(t *testing.T) {
	m, err := metrics.New(metrics.Sources{}, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := gather(t, m.Registry())
	var names []string
	for k := range got {
		names = append(names, k)
	}
	slices.Sort(names)
	want := []string{"baton_handover_seconds_count", "baton_handover_seconds_sum", "baton_term_ready_seconds_count", "baton_term_ready_seconds_sum"}
	if !slices.Equal(names, want) {
		t.Errorf("series %v, want only the histograms %v", names, want)
	}
}

func TestHistograms(t *testing.T) {
	m, err := metrics.New(metrics.Sources{}, metrics.Options{TermReadyBuckets: []float64{0.001, 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveTermReady(500 * time.Microsecond)
	m.ObserveTermReady(5 * time.Millisecond)
	m.ObserveTermReady(-time.Second) // recorded as 0
	m.ObserveHandover(1500 * time.Millisecond)
	got := gather(t, m.Registry())
	expect(t, got, map[string]float64{
		"baton_term_ready_seconds_count": 3,
		"baton_term_ready_seconds_sum":   0.0055,
		"baton_handover_seconds_count":   1,
		"baton_handover_seconds_sum":     1.5,
	})
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() != "baton_term_ready_seconds" {
			continue
		}
		var cum []uint64
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			cum = append(cum, b.GetCumulativeCount())
		}
		if !slices.Equal(cum, []uint64{2, 3}) {
			t.Errorf("cumulative buckets %v, want [2 3]", cum)
		}
	}
}

// TestRealBus reads a real bus: deliveries, drops and replays show up as
// they happen.
func TestRealBus(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(16, discardLogger())
	ch := busevents.Subscribe[busevents.Event](context.Background(), bus, "slow", 1, busevents.Types(configType))
	bus.Start()
	defer bus.Stop()
	m, err := metrics.New(metrics.Sources{Bus: bus}, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &configEvent{}
	bus.Publish(ev)
	bus.Publish(ev) // the buffer of 1 is full: dropped
	<-ch
	bus.Republish(ev, bus.NextSequence())
	expect(t, gather(t, m.Registry()), map[string]float64{
		"baton_bus_delivered_total{subscriber=slow,type=config.validated}": 2,
		"baton_bus_dropped_total{subscriber=slow,type=config.validated}":   1,
		"baton_replays_total{type=config.validated}":                       1,
	})
}

// TestCountersSurviveTerms: a leader-only component subscribes anew each
// term; its series keep counting across the subscriptions.
func TestCountersSurviveTerms(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(16, discardLogger())
	bus.Start()
	defer bus.Stop()
	m, err := metrics.New(metrics.Sources{Bus: bus}, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &configEvent{}
	for term := 1; term <= 3; term++ {
		ch := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), bus, "publisher", 4, busevents.Types(configType))
		bus.Publish(ev)
		busevents.Unsubscribe(bus, ch)
		expect(t, gather(t, m.Registry()), map[string]float64{
			"baton_bus_delivered_total{subscriber=publisher,type=config.validated}": float64(term),
		})
	}
}

func TestHandlerServesTextFormat(t *testing.T) {
	m, err := metrics.New(metrics.Sources{Election: &fakeElection{leader: true, term: 42}}, metrics.Options{ProcessMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{"baton_term 42\n", "baton_is_leader 1\n", "# TYPE baton_handover_seconds histogram", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body lacks %q", want)
		}
	}
}

func ExampleNew() {
	m, err := metrics.New(metrics.Sources{Election: &fakeElection{leader: true, term: 7}}, metrics.Options{})
	if err != nil {
		panic(err)
	}
	m.ObserveTermReady(300 * time.Microsecond)
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				fmt.Printf("%s count=%d\n", mf.GetName(), s.GetHistogram().GetSampleCount())
			default:
				fmt.Printf("%s %g\n", mf.GetName(), s.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// baton_handover_seconds count=0
	// baton_is_leader 1
	// baton_term 7
	// baton_term_ready_seconds count=1
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestOptionsCollectors(t *testing.T) {
	extra := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_things_total", Help: "Things."})
	extra.Add(3)
	m, err := metrics.New(metrics.Sources{}, metrics.Options{Collectors: []prometheus.Collector{extra}})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, gather(t, m.Registry()), map[string]float64{"app_things_total": 3})

	_, err = metrics.New(metrics.Sources{}, metrics.Options{Collectors: []prometheus.Collector{extra, nil}})
	if !errors.Is(err, metrics.ErrNilCollector) || !strings.Contains(err.Error(), "Options.Collectors[1]") {
		t.Errorf("nil collector: err = %v, want ErrNilCollector naming Options.Collectors[1]", err)
	}
	// A collector clashing with a core metric is refused, not shadowed.
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_term_ready_seconds", Help: "clash"})
	if _, err := metrics.New(metrics.Sources{}, metrics.Options{Collectors: []prometheus.Collector{clash}}); err == nil {
		t.Error("a collector clashing with a core metric was accepted")
	}
}

// TestElectionCounters: the elector's counters of bad cluster input and of
// takeovers on the death signal are exported when the source is set, read at
// scrape time.
func TestElectionCounters(t *testing.T) {
	var ec metrics.ElectionCounters
	m, err := metrics.New(metrics.Sources{ElectionCounters: func() metrics.ElectionCounters { return ec }}, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	ec = metrics.ElectionCounters{OutOfRange: 3, DuplicateIdentity: 1, DeathTakeovers: 2}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"baton_lease_values_out_of_range_total 3\n", "baton_duplicate_identity_total 1\n", "baton_death_takeovers_total 2\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body lacks %q", want)
		}
	}
}
