package controllerruntime

import (
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// collector reads the Runtime's state at scrape time; only the term-ready latency is
// observed as it happens.
type collector struct {
	r         *Runtime
	refused   atomic.Uint64
	termReady prometheus.Histogram

	isLeader, term, terms, readyTerms, refusedDesc *prometheus.Desc
	outOfRange, duplicateIdentity, deathTakeovers  *prometheus.Desc
}

func newCollector(r *Runtime) *collector {
	id := prometheus.Labels{"identity": r.identity}
	return &collector{
		r: r,
		termReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "baton_term_ready_seconds",
			Help:        "Time from the lease acquisition to the term's leader-only work running.",
			ConstLabels: id,
			Buckets:     []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		isLeader:   prometheus.NewDesc("baton_is_leader", "1 while this replica leads, by its own clock.", nil, id),
		term:       prometheus.NewDesc("baton_term", "The current term, 0 while not leading.", nil, id),
		terms:      prometheus.NewDesc("baton_terms_total", "Terms this replica started.", nil, id),
		readyTerms: prometheus.NewDesc("baton_terms_ready_total", "Terms whose leader-only work started.", nil, id),
		outOfRange: prometheus.NewDesc("baton_lease_values_out_of_range_total",
			"Values read from the Lease outside what Baton writes (each logged at WARN once per record).", nil, id),
		duplicateIdentity: prometheus.NewDesc("baton_duplicate_identity_total",
			"Writes of the Lease in this replica's name that it did not make: another replica runs with the same identity.", nil, id),
		deathTakeovers: prometheus.NewDesc("baton_death_takeovers_total",
			"Terms this replica started by taking the Lease, or a shard Lease of a sharded controller, from a holder whose container the kubelet reported terminated, without waiting the lease out.", nil, id),
		refusedDesc: prometheus.NewDesc("baton_fenced_writes_refused_total", "Writes the fence refused: the fenced client's checks (no term, ended term, newer stamp, no resourceVersion) and the API server's fence.", nil, id),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.isLeader, c.term, c.terms, c.readyTerms, c.refusedDesc, c.outOfRange, c.duplicateIdentity, c.deathTakeovers} {
		ch <- d
	}
	c.termReady.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	leader := 0.0
	if c.r.IsLeader() {
		leader = 1
	}
	st := c.r.Status()
	ch <- prometheus.MustNewConstMetric(c.isLeader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(c.r.Term()))
	ch <- prometheus.MustNewConstMetric(c.terms, prometheus.CounterValue, float64(st.Terms))
	ch <- prometheus.MustNewConstMetric(c.readyTerms, prometheus.CounterValue, float64(st.ReadyTerms))
	ch <- prometheus.MustNewConstMetric(c.refusedDesc, prometheus.CounterValue, float64(c.refused.Load()))
	var es k8sle.Stats // zero without the single-leader election
	if c.r.elector != nil {
		es = c.r.elector.Elector().Stats()
	}
	ch <- prometheus.MustNewConstMetric(c.outOfRange, prometheus.CounterValue, float64(es.OutOfRange))
	ch <- prometheus.MustNewConstMetric(c.duplicateIdentity, prometheus.CounterValue, float64(es.DuplicateIdentity))
	deaths := es.DeathTakeovers
	c.r.mu.Lock()
	sharded := slices.Clone(c.r.sharded)
	c.r.mu.Unlock()
	for _, s := range sharded {
		deaths += s.sharder.Stats().DeathTakeovers
	}
	ch <- prometheus.MustNewConstMetric(c.deathTakeovers, prometheus.CounterValue, float64(deaths))
	c.termReady.Collect(ch)
}
