package controllerruntime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestRingMetricsAndShapeRefusal runs two replicas of a sharded controller at S=8 and
// checks the ring's metrics (issue 27, Visibility) against their sharders: shards
// owned, moves in and out, the ownerless histogram. Then a third replica starts at
// S=4 (issue 25, defect 3): it refuses to campaign, leads nothing, its ring readiness
// check fails and it counts the refusal; the two others count it mismatched.
func TestRingMetricsAndShapeRefusal(t *testing.T) {
	const shards = 8
	rec := &recorder{}
	nodes, handles := make([]*node, 3), make([]*Sharded, 3)
	for i := range nodes {
		s := shards
		if i == 2 {
			s = 4
		}
		nodes[i] = newNode(t, fmt.Sprint("m", i), "ringmetrics-single")
		h, err := nodes[i].rt.AddShardedController(ShardedController{
			Name: "metered", Reconciler: rec, For: &corev1.ConfigMap{},
			Sharding: sharding.Config{Namespace: "default", Shards: s,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry},
		})
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = h
	}
	nodes[0].start(t)
	nodes[1].start(t)
	batontest.WaitFor(t, 30*time.Second, "the two S=8 replicas balanced", func() bool {
		return len(handles[0].Sharder().Owned()) == shards/2 && len(handles[1].Sharder().Owned()) == shards/2
	})
	for i := range 2 {
		checkRingMetrics(t, nodes[i].registry, handles[i])
	}

	nodes[2].start(t)
	batontest.WaitFor(t, 30*time.Second, "the S=4 replica refusing, the others seeing it", func() bool {
		return handles[2].Sharder().Refusing() && len(handles[0].Sharder().Mismatched()) == 1 && len(handles[1].Sharder().Mismatched()) == 1
	})
	if err := handles[2].readyz(nil); err == nil || !strings.Contains(err.Error(), "refuses to campaign") {
		t.Errorf("readyz of the refusing replica: %v, want a refusal", err)
	}
	if err := handles[0].readyz(nil); err != nil {
		t.Errorf("readyz of a leading replica: %v, want nil", err)
	}
	if got := len(handles[2].Sharder().Owned()); got != 0 {
		t.Errorf("the S=4 replica leads %d shards, want none", got)
	}
	if got := ringMetric(t, nodes[2].registry, "baton_ring_shape_refusals_total", "metered", ""); got < 1 {
		t.Errorf("baton_ring_shape_refusals_total of the S=4 replica = %v, want at least 1", got)
	}
	for i := range 2 {
		if got := ringMetric(t, nodes[i].registry, "baton_ring_shape_mismatch", "metered", ""); got != 1 {
			t.Errorf("baton_ring_shape_mismatch of m%d = %v, want 1", i, got)
		}
		checkRingMetrics(t, nodes[i].registry, handles[i])
	}
}

// checkRingMetrics checks that the ring metrics of h's registry g say what h's
// sharder says. The two are read one after the other while the ring runs (a late
// ownerless episode may end between them), so it compares again for up to 5s before
// it reports the last difference.
func checkRingMetrics(t *testing.T, g prometheus.Gatherer, h *Sharded) {
	t.Helper()
	var diffs []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if diffs = ringMetricDiffs(t, g, h); len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, d := range diffs {
		t.Error(d)
	}
	if st := h.Sharder().Stats(); st.Acquisitions == 0 {
		t.Errorf("stats %+v: want acquisitions", st)
	}
}

// ringMetricDiffs returns where the ring metrics of g differ from h's sharder.
func ringMetricDiffs(t *testing.T, g prometheus.Gatherer, h *Sharded) []string {
	t.Helper()
	st := h.Sharder().Stats()
	var diffs []string
	for _, m := range []struct {
		name, direction string
		want            float64
	}{
		{"baton_ring_shards_owned", "", float64(len(h.Sharder().Owned()))},
		{"baton_ring_shard_moves_total", "in", float64(st.Acquisitions)},
		{"baton_ring_shard_moves_total", "out", float64(st.HandOvers)},
		{"baton_ring_shape_mismatch", "", float64(len(h.Sharder().Mismatched()))},
		{"baton_ring_shape_refusals_total", "", float64(st.ShapeRefusals)},
		{"baton_ring_ownerless_seconds", "", float64(h.Sharder().Ownerless().Count)},
	} {
		if got := ringMetric(t, g, m.name, "metered", m.direction); got != m.want {
			diffs = append(diffs, fmt.Sprintf("%s{ring=metered,direction=%q} = %v, want %v", m.name, m.direction, got, m.want))
		}
	}
	return diffs
}

// ringMetric returns the value of name's series for ring (and direction, when not
// empty).
func ringMetric(t *testing.T, g prometheus.Gatherer, name, ring, direction string) float64 {
	t.Helper()
	want := map[string]string{"ring": ring}
	if direction != "" {
		want["direction"] = direction
	}
	return seriesValue(t, g, name, want)
}

// seriesValue returns the value of name's series whose labels include want: a
// gauge's or counter's value, a histogram's count.
func seriesValue(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if label(m, k) != v {
					continue series
				}
			}
			return m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("metric %s%v not found", name, want)
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
