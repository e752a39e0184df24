package controllerruntime

import (
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// collector reads the Runtime's state at scrape time; only the term-ready latency is
// observed as it happens.
type collector struct {
	r         *Runtime
	refused   atomic.Uint64
	termReady prometheus.Histogram

	isLeader, term, terms, readyTerms, refusedDesc *prometheus.Desc
	outOfRange, duplicateIdentity, deathTakeovers  *prometheus.Desc
	ringShapeMismatch, ringShapeRefusals           *prometheus.Desc
	ringOwned, ringMoves, ringOwnerless            *prometheus.Desc
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
		ringShapeMismatch: prometheus.NewDesc("baton_ring_shape_mismatch",
			"Live members of a sharded controller's ring that use another shape (Shards) than this replica: not 0 means the replicas disagree on Shards, and the later ones refuse to campaign.", []string{"ring"}, id),
		ringShapeRefusals: prometheus.NewDesc("baton_ring_shape_refusals_total",
			"Times this replica refused to campaign for a ring's shards because members of another shape (Shards) were active.", []string{"ring"}, id),
		ringOwned: prometheus.NewDesc("baton_ring_shards_owned",
			"Shards of a sharded controller's ring this replica leads now.", []string{"ring"}, id),
		ringMoves: prometheus.NewDesc("baton_ring_shard_moves_total",
			`Shards of a ring that moved to this replica (direction "in": shard terms it started) or that it handed over to another (direction "out").`,
			[]string{"ring", "direction"}, id),
		ringOwnerless: prometheus.NewDesc("baton_ring_ownerless_seconds",
			"How long shards of a ring were without owner, as this replica measured them: those it handed over (release to the next holder's take), and those it took because their owner went (from when it counted the owner gone; a lower bound for a crash). Each move is measured by one replica: sum the replicas.",
			[]string{"ring"}, id),
		refusedDesc: prometheus.NewDesc("baton_fenced_writes_refused_total", "Writes the fence refused: the fenced client's checks (no term, ended term, newer stamp, no resourceVersion) and the API server's fence.", nil, id),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.isLeader, c.term, c.terms, c.readyTerms, c.refusedDesc, c.outOfRange, c.duplicateIdentity, c.deathTakeovers,
		c.ringShapeMismatch, c.ringShapeRefusals, c.ringOwned, c.ringMoves, c.ringOwnerless} {
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
	ch <- prometheus.MustNewConstMetric(c.duplicateIdentity, prometheus.CounterValue, float64(es.DuplicateIdentity))
	deaths, outOfRange := es.DeathTakeovers, es.OutOfRange
	c.r.mu.Lock()
	sharded := slices.Clone(c.r.sharded)
	c.r.mu.Unlock()
	for _, s := range sharded {
		st := s.sharder.Stats()
		deaths += st.DeathTakeovers
		outOfRange += st.OutOfRange
		c.collectRing(ch, s, st)
	}
	ch <- prometheus.MustNewConstMetric(c.outOfRange, prometheus.CounterValue, float64(outOfRange))
	ch <- prometheus.MustNewConstMetric(c.deathTakeovers, prometheus.CounterValue, float64(deaths))
	c.termReady.Collect(ch)
}

// collectRing sends the metrics of one sharded controller's ring, labelled with the
// ring's name.
func (c *collector) collectRing(ch chan<- prometheus.Metric, s *Sharded, st sharding.Stats) {
	ring := s.config.Name
	ch <- prometheus.MustNewConstMetric(c.ringShapeMismatch, prometheus.GaugeValue, float64(len(s.sharder.Mismatched())), ring)
	ch <- prometheus.MustNewConstMetric(c.ringShapeRefusals, prometheus.CounterValue, float64(st.ShapeRefusals), ring)
	ch <- prometheus.MustNewConstMetric(c.ringOwned, prometheus.GaugeValue, float64(len(s.sharder.Owned())), ring)
	ch <- prometheus.MustNewConstMetric(c.ringMoves, prometheus.CounterValue, float64(st.Acquisitions), ring, "in")
	ch <- prometheus.MustNewConstMetric(c.ringMoves, prometheus.CounterValue, float64(st.HandOvers), ring, "out")
	h := s.sharder.Ownerless()
	buckets := make(map[float64]uint64, len(h.Buckets))
	for i, b := range h.Buckets {
		buckets[b] = h.Counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.ringOwnerless, h.Count, h.Sum, buckets, ring)
}
