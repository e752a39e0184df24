package controllerruntime

import (
	"errors"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-dev/baton/pkg/controller/metrics"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// masterStatusOpts are controller-runtime's leader_election_master_status, which it
// registers in its Registry at init: registering the same (name, help and labels)
// again finds that collector, which the Runtime then sets.
var masterStatusOpts = prometheus.GaugeOpts{
	Name: "leader_election_master_status",
	Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
}

// masterStatus registers leader_election_master_status{name} on reg, or returns the
// collector of that name reg has (controller-runtime's, in its Registry).
func masterStatus(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(masterStatusOpts, []string{"name"})
	err := reg.Register(g)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.GaugeVec); ok {
			return existing, nil
		}
	}
	return g, err
}

// collector reads the Runtime's state at scrape time; only the term-ready latency is
// observed as it happens.
type collector struct {
	r         *Runtime
	refused   atomic.Uint64
	termReady prometheus.Histogram

	isLeader, term, transitions, readyTerms, refusedDesc *prometheus.Desc
	outOfRange, duplicateIdentity, deathTakeovers        *prometheus.Desc
	ringShapeMismatch, ringShapeRefusals                 *prometheus.Desc
	ringOwned, ringMoves, ringOwnerless                  *prometheus.Desc
	// work are the counters of leader-only work, the same for a leader-only
	// controller and for a sharded controller's ShardWork ("<controller>/<work>").
	work metrics.WorkDescs
}

func newCollector(r *Runtime) *collector {
	return &collector{
		r:    r,
		work: metrics.NewWorkDescs(),
		termReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace,
			Name:      "term_ready_seconds",
			Help:      "Time from the lease acquisition to the term's leader-only work running.",
			Buckets:   []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		isLeader:    metrics.Desc("is_leader", "1 while this replica leads, by its own clock, else 0."),
		term:        metrics.Desc("term", "The current term, 0 while not leading."),
		transitions: metrics.Desc("leadership_transitions_total", "Leadership terms this replica's runtime started (acquired) and ended (lost).", "transition"),
		readyTerms:  metrics.Desc("terms_ready_total", "Terms whose leader-only work started."),
		outOfRange: metrics.Desc("lease_values_out_of_range_total",
			"Values read from the Lease outside what Baton writes (each logged as a warning once per record)."),
		duplicateIdentity: metrics.Desc("duplicate_identity_total",
			"Writes of the Lease in this replica's name that it did not make: another replica runs with the same identity."),
		deathTakeovers: metrics.Desc("death_takeovers_total",
			"Terms this replica started by taking the Lease, or a shard Lease of a sharded controller, from a holder whose container the kubelet reported terminated, without waiting the lease out."),
		refusedDesc: metrics.Desc("fenced_writes_refused_total", "Writes the fence refused: the fenced client's checks (no term, ended term, newer stamp, no resourceVersion) and the API server's fence."),
		ringShapeMismatch: metrics.Desc("ring_shape_mismatch",
			"Live members of a sharded controller's ring that use another shape (Shards) than this replica: not 0 means the replicas disagree on Shards, and the later ones refuse to campaign.", "ring"),
		ringShapeRefusals: metrics.Desc("ring_shape_refusals_total",
			"Times this replica refused to campaign for a ring's shards because members of another shape (Shards) were active.", "ring"),
		ringOwned: metrics.Desc("ring_shards_owned",
			"Shards of a sharded controller's ring this replica leads now.", "ring"),
		ringMoves: metrics.Desc("ring_shard_moves_total",
			`Shards of a ring that moved to this replica (direction "in": shard terms it started) or that it handed over to another (direction "out").`,
			"ring", "direction"),
		ringOwnerless: metrics.Desc("ring_ownerless_seconds",
			"How long shards of a ring were without owner, as this replica measured them: those it handed over (release to the next holder's take), and those it took because their owner went (from when it counted the owner gone; a lower bound for a crash). Each move is measured by one replica: sum the replicas.",
			"ring"),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.isLeader, c.term, c.transitions, c.readyTerms, c.refusedDesc, c.outOfRange, c.duplicateIdentity, c.deathTakeovers,
		c.ringShapeMismatch, c.ringShapeRefusals, c.ringOwned, c.ringMoves, c.ringOwnerless} {
		ch <- d
	}
	c.work.Describe(ch)
	c.termReady.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := metrics.NewEmitter(ch)
	st := c.r.Status()
	e.Gauge(c.isLeader, metrics.BoolValue(c.r.IsLeader()))
	e.Gauge(c.term, float64(c.r.Term()))
	lost := st.Terms
	if st.Leading && lost > 0 {
		lost-- // the term running has not ended
	}
	e.Counter(c.transitions, st.Terms, "acquired")
	e.Counter(c.transitions, lost, "lost")
	e.Counter(c.readyTerms, st.ReadyTerms)
	for _, cs := range st.Components {
		c.work.Emit(e, cs.Name, metrics.ComponentStats(cs))
	}
	e.Counter(c.refusedDesc, c.refused.Load())
	var es k8sle.Stats // zero without the single-leader election
	if c.r.elector != nil {
		es = c.r.elector.Elector().Stats()
	}
	e.Counter(c.duplicateIdentity, es.DuplicateIdentity)
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
	e.Counter(c.outOfRange, outOfRange)
	e.Counter(c.deathTakeovers, deaths)
	c.termReady.Collect(ch)
}

// collectRing sends the metrics of one sharded controller's ring, labelled with the
// ring's name.
func (c *collector) collectRing(ch chan<- prometheus.Metric, s *Sharded, st sharding.Stats) {
	ring := s.config.Name
	e := metrics.NewEmitter(ch)
	e.Gauge(c.ringShapeMismatch, float64(len(s.sharder.Mismatched())), ring)
	e.Counter(c.ringShapeRefusals, st.ShapeRefusals, ring)
	e.Gauge(c.ringOwned, float64(len(s.sharder.Owned())), ring)
	e.Counter(c.ringMoves, st.Acquisitions, ring, "in")
	e.Counter(c.ringMoves, st.HandOvers, ring, "out")
	h := s.sharder.Ownerless()
	buckets := make(map[float64]uint64, len(h.Buckets))
	for i, b := range h.Buckets {
		buckets[b] = h.Counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.ringOwnerless, h.Count, h.Sum, buckets, ring)
	if s.workers != nil {
		for name, ws := range s.workers.StatsByWork() {
			c.work.Emit(e, s.spec.Name+"/"+name, ws)
		}
	}
}
