package controllerruntime

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/baton-dev/baton/pkg/batontest"
)

// wantMetricNames are the Runtime's metric names: Baton's runtime's, and
// controller-runtime's leader_election_master_status.
var wantMetricNames = []string{
	"baton_component_failures_total", "baton_component_overstays_total", "baton_component_panics_total", "baton_component_starts_total",
	"baton_death_takeovers_total", "baton_duplicate_identity_total", "baton_fenced_writes_refused_total",
	"baton_is_leader", "baton_leadership_transitions_total", "baton_lease_values_out_of_range_total",
	"baton_term", "baton_term_ready_seconds", "baton_terms_ready_total", "leader_election_master_status",
}

// TestMetricNamesAndLabels: a leading Runtime registers the metric names of Baton's
// runtime and leader_election_master_status{name=<Lease>} = 1, and no metric has a
// label that changes with a restart (identity).
func TestMetricNamesAndLabels(t *testing.T) {
	n := newNode(t, "metrics", "metric-names")
	if err := NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Complete(newRequestLog("m")); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	batontest.WaitFor(t, 20*time.Second, "leading", n.rt.IsLeader)
	// The gauge is set by the elector's OnStartedLeading, just after IsLeader turns true.
	batontest.WaitFor(t, 5*time.Second, "leader_election_master_status 1", func() bool {
		return metricValue(t, n.registry, "leader_election_master_status") == 1
	})
	mfs, err := n.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "identity" {
					t.Errorf("%s has the label identity, which changes with every restart", mf.GetName())
				}
			}
		}
		if mf.GetName() == "leader_election_master_status" {
			m := mf.GetMetric()[0]
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != "metric-names" || m.GetGauge().GetValue() != 1 {
				t.Errorf("leader_election_master_status %v, want {name=\"metric-names\"} 1", m)
			}
		}
	}
	if !slices.Equal(names, wantMetricNames) {
		t.Errorf("metrics %v\nwant    %v", names, wantMetricNames)
	}
	n.stop(t)
	assertMetric(t, n.registry, "leader_election_master_status", 0)
}

// TestMasterStatusReusesControllerRuntimes: on controller-runtime's Registry, which
// registers leader_election_master_status at init, the Runtime finds that gauge
// instead of failing on a second registration, and what it sets is what the
// manager's metrics endpoint serves.
func TestMasterStatusReusesControllerRuntimes(t *testing.T) {
	g, err := masterStatus(ctrlmetrics.Registry)
	if err != nil {
		t.Fatalf("a second registration: %v", err)
	}
	g.WithLabelValues("reuse-probe").Set(1)
	defer g.DeleteLabelValues("reuse-probe")
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "leader_election_master_status" && m.GetLabel()[0].GetValue() == "reuse-probe" && m.GetGauge().GetValue() == 1 {
				return
			}
		}
	}
	t.Error("leader_election_master_status{name=\"reuse-probe\"} 1 not served by controller-runtime's Registry")
}

// lineLog collects a logr sink's lines as JSON objects.
type lineLog struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
}

func (l *lineLog) logger() logr.Logger {
	return funcr.NewJSON(func(obj string) {
		var m map[string]any
		_ = json.Unmarshal([]byte(obj), &m)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines, l.raw = append(l.lines, m), append(l.raw, obj)
	}, funcr.Options{Verbosity: 10})
}

// lowerCamel is controller-runtime's key style.
var lowerCamel = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// TestLogKeysAndWarnings: every key the Runtime, its election and a sharded
// controller log is lowerCamel and appears once per line, and a slog warning reaches
// logr with severity=warning.
func TestLogKeysAndWarnings(t *testing.T) {
	var lines lineLog
	mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := New(mgr, Options{LeaderElectionID: "log-keys", LeaderElectionNamespace: "default", Identity: "logs",
		LeaseDuration: &testLease, RenewDeadline: &testRenew, RetryPeriod: &testRetry, Clientset: cs,
		MetricsRegisterer: prometheus.NewRegistry(), Logger: lines.logger()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewControllerManagedBy(rt.Manager()).For(&corev1.ConfigMap{}).Named("log-keys-sharded").
		Sharded(shardingConfig("default", 4)).Build(newRequestLog("l"))
	if err != nil {
		t.Fatal(err)
	}
	rt.slogger.Warn("a warning", "someKey", 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	batontest.WaitFor(t, 20*time.Second, "leading", rt.IsLeader)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines.mu.Lock()
	defer lines.mu.Unlock()
	warned := false
	for i, line := range lines.lines {
		raw := lines.raw[i]
		for k := range line {
			// ConfigMap: controller-runtime's own key of a request's object, its kind.
			if !lowerCamel.MatchString(k) && k != "ConfigMap" {
				t.Errorf("key %q is not lowerCamel: %s", k, raw)
			}
			if strings.Count(raw, `"`+k+`":`) > 1 {
				t.Errorf("key %q repeats: %s", k, raw)
			}
		}
		if line["msg"] == "a warning" && line[severityKey] == severityWarning {
			warned = true
		}
	}
	if !warned {
		t.Error("the slog warning did not reach logr with severity=warning")
	}
}
