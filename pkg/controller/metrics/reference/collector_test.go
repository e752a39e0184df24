package reference_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/metrics"
	"github.com/baton-dev/baton/pkg/controller/metrics/reference"
)

// Strict fakes: each returns exactly what the test set.

type fakePublisher struct{ st configpublisher.State }

func (f *fakePublisher) State() configpublisher.State { return f.st }

type fakeConfig struct{ st configchange.Stats }

func (f *fakeConfig) Stats() configchange.Stats { return f.st }

func gather(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(parts)
			key := mf.GetName()
			if len(parts) > 0 {
				key += "{" + strings.Join(parts, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestCollectorReadsSourcesAtScrapeTime(t *testing.T) {
	cfg := &fakeConfig{st: configchange.Stats{Validated: 6, Invalid: 2, Unchanged: 1, CurrentInvalid: true}}
	pub := &fakePublisher{st: configpublisher.State{Running: true, Fenced: true, Writes: 4, Unchanged: 3, Conflicts: 2, StaleRefusals: 1, Failures: 5}}
	m, err := metrics.New(metrics.Sources{}, metrics.Options{
		Collectors: []prometheus.Collector{reference.NewCollector(reference.Sources{Config: cfg, Publisher: pub})},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"baton_config_documents_total{outcome=validated}": 6,
		"baton_config_documents_total{outcome=invalid}":   2,
		"baton_config_documents_total{outcome=unchanged}": 1,
		"baton_config_invalid":                            1,
		"baton_publisher_writes_total{result=written}":    4,
		"baton_publisher_writes_total{result=unchanged}":  3,
		"baton_publisher_writes_total{result=conflict}":   2,
		"baton_publisher_writes_total{result=stale_term}": 1,
		"baton_publisher_writes_total{result=failed}":     5,
		"baton_publisher_fenced":                          1,
	}
	check := func() {
		t.Helper()
		got := gather(t, m.Registry())
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
	}
	check()
	// A second scrape sees the sources as they are now.
	cfg.st.CurrentInvalid, pub.st.Running = false, false
	want["baton_config_invalid"], want["baton_publisher_fenced"] = 0, 0
	check()
}

func TestNilSourcesAreLeftOut(t *testing.T) {
	m, err := metrics.New(metrics.Sources{}, metrics.Options{
		Collectors: []prometheus.Collector{reference.NewCollector(reference.Sources{})},
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range gather(t, m.Registry()) {
		if strings.HasPrefix(k, "baton_config") || strings.HasPrefix(k, "baton_publisher") {
			t.Errorf("series %s without a source", k)
		}
	}
}
