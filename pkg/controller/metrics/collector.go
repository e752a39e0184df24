package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termrun"
)

// collector reads the sources at scrape time.
type collector struct {
	src Sources

	isLeader, term, transitions, termsReady, termReadyNow *prometheus.Desc
	replays, delivered, dropped, skipped, rejected        *prometheus.Desc
	compUp, compFailed, compMissing                       *prometheus.Desc
	work                                                  WorkDescs
	subscribeTimeouts, hookFailures, leadershipDropped    *prometheus.Desc
	missingTerms, stepDowns                               *prometheus.Desc
	campaignWaiting, outOfRange, duplicateIdentity        *prometheus.Desc
	deathTakeovers                                        *prometheus.Desc
}

func newCollector(src Sources) *collector {
	return &collector{
		src:          src,
		isLeader:     Desc("is_leader", "1 while this replica leads, by its own clock, else 0."),
		term:         Desc("term", "The term this replica leads in (the lease's fencing token), 0 while it does not lead."),
		transitions:  Desc("leadership_transitions_total", "Leadership terms this replica's runtime started (acquired) and ended (lost).", "transition"),
		termsReady:   Desc("terms_ready_total", "Terms of this replica that became ready."),
		termReadyNow: Desc("term_ready", "1 while this replica leads and its current term is ready, else 0."),
		replays:      Desc("replays_total", "State replays published on the bus, per event type.", "type"),
		delivered:    Desc("bus_delivered_total", "Events queued for a subscriber, per subscriber and event type.", "subscriber", "type"),
		dropped:      Desc("bus_dropped_total", "Events a subscriber lost to a full buffer, per subscriber and event type.", "subscriber", "type"),
		skipped:      Desc("bus_skipped_total", "Superseded state events removed from a full buffer for a newer version, per subscriber and event type.", "subscriber", "type"),
		rejected:     Desc("bus_rejected_total", "Events the bus refused: nil events and events published after it stopped.", "reason"),
		compUp:       Desc("component_up", "1 while the component's Start runs, else 0.", "component", "leader_only"),
		compFailed:   Desc("component_failed", "1 while the component's last run failed, else 0.", "component", "leader_only"),
		work:         NewWorkDescs(),
		subscribeTimeouts: Desc("runtime_subscribe_timeouts_total",
			"Leader-only runs that did not signal Subscribed within the runtime's subscribe timeout."),
		hookFailures:      Desc("runtime_hook_failures_total", "Term hooks that panicked."),
		leadershipDropped: Desc("runtime_leadership_events_dropped_total", "Leadership events the runtime lost to a full subscription buffer (should stay 0)."),
		compMissing: Desc("component_missing", "1 while this replica leads a term that misses the leader-only component "+
			"(still running from an earlier term, or failed in this one), else 0.", "component"),
		missingTerms: Desc("runtime_terms_missing_component_total", "Terms of this replica that missed a leader-only component at some point."),
		stepDowns:    Desc("runtime_step_downs_total", "Terms this replica's runtime asked to end, after the step-down grace, because they missed a leader-only component."),
		campaignWaiting: Desc("runtime_campaign_waiting",
			"1 while this replica does not campaign because its all-replica components have not read the state a leader needs, else 0."),
		outOfRange: Desc("lease_values_out_of_range_total",
			"Values read from the Lease outside what Baton writes (each logged at WARN once per record)."),
		duplicateIdentity: Desc("duplicate_identity_total",
			"Writes of the Lease in this replica's name that it did not make: another replica runs with the same identity."),
		deathTakeovers: Desc("death_takeovers_total",
			"Terms this replica started by taking the Lease from a holder whose container the kubelet reported terminated, without waiting the lease out."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.isLeader, c.term, c.transitions, c.termsReady, c.termReadyNow,
		c.replays, c.delivered, c.dropped, c.skipped, c.rejected,
		c.compUp, c.compFailed,
		c.subscribeTimeouts, c.hookFailures, c.leadershipDropped,
		c.compMissing, c.missingTerms, c.stepDowns, c.campaignWaiting,
		c.outOfRange, c.duplicateIdentity, c.deathTakeovers,
	} {
		ch <- d
	}
	c.work.Describe(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := Emitter{ch}
	if el := c.src.Election; el != nil {
		e.Gauge(c.isLeader, BoolValue(el.IsLeader()))
		e.Gauge(c.term, float64(el.Term()))
	}
	if f := c.src.ElectionCounters; f != nil {
		ec := f()
		e.Counter(c.outOfRange, ec.OutOfRange)
		e.Counter(c.duplicateIdentity, ec.DuplicateIdentity)
		e.Counter(c.deathTakeovers, ec.DeathTakeovers)
	}
	if r := c.src.Runtime; r != nil {
		c.collectRuntime(e, r.Status())
	}
	if b := c.src.Bus; b != nil {
		c.collectBus(e, b.Stats())
	}
}

func (c *collector) collectRuntime(e Emitter, st lifecycle.Status) {
	lost := st.Terms
	if st.Leading && lost > 0 {
		lost--
	}
	e.Counter(c.transitions, st.Terms, "acquired")
	e.Counter(c.transitions, lost, "lost")
	e.Counter(c.termsReady, st.ReadyTerms)
	e.Gauge(c.termReadyNow, BoolValue(st.Leading && st.TermReady))
	e.Counter(c.subscribeTimeouts, st.SubscribeTimeouts)
	e.Counter(c.hookFailures, st.HookFailures)
	e.Counter(c.leadershipDropped, st.LeadershipDropped)
	e.Counter(c.missingTerms, st.MissingTerms)
	e.Counter(c.stepDowns, st.StepDowns)
	e.Gauge(c.campaignWaiting, BoolValue(st.CampaignWaiting))
	for _, cs := range st.Components {
		lo := strconv.FormatBool(cs.LeaderOnly)
		e.Gauge(c.compUp, BoolValue(cs.State == lifecycle.StateRunning), cs.Name, lo)
		e.Gauge(c.compFailed, BoolValue(cs.State == lifecycle.StateFailed), cs.Name, lo)
		c.work.Emit(e, cs.Name, ComponentStats(cs))
		if cs.LeaderOnly {
			e.Gauge(c.compMissing, BoolValue(cs.Missing), cs.Name)
		}
	}
}

func (c *collector) collectBus(e Emitter, st busevents.Stats) {
	for typ, n := range st.Replayed {
		e.Counter(c.replays, n, typ)
	}
	e.Counter(c.rejected, st.RejectedNil, "nil")
	e.Counter(c.rejected, st.RejectedStopped, "stopped")
	// Totals add up every subscription of a name, live or ended, so the
	// counters never go down as leader-only subscriptions come and go.
	// Summing again keeps each series unique whatever the source does.
	type key struct{ sub, typ string }
	delivered, dropped, skipped := map[key]uint64{}, map[key]uint64{}, map[key]uint64{}
	for _, s := range st.Totals {
		for typ, n := range s.Delivered {
			delivered[key{s.Name, typ}] += n
		}
		for typ, n := range s.Dropped {
			dropped[key{s.Name, typ}] += n
		}
		for typ, n := range s.Skipped {
			skipped[key{s.Name, typ}] += n
		}
	}
	for k, n := range delivered {
		e.Counter(c.delivered, n, k.sub, k.typ)
	}
	for k, n := range dropped {
		e.Counter(c.dropped, n, k.sub, k.typ)
	}
	for k, n := range skipped {
		e.Counter(c.skipped, n, k.sub, k.typ)
	}
}

// Emitter sends constant samples to a collector's channel; it is for
// collectors that, like the core's, read their sources at scrape time.
type Emitter struct{ ch chan<- prometheus.Metric }

// NewEmitter returns an Emitter sending to ch, the channel of Collect.
func NewEmitter(ch chan<- prometheus.Metric) Emitter { return Emitter{ch} }

// Gauge sends a gauge sample of d with the label values.
func (e Emitter) Gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Counter sends a counter sample of d with the label values.
func (e Emitter) Counter(d *prometheus.Desc, v uint64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

// Desc returns the description of the metric baton_<name>, for collectors
// that add to the core's metrics under the same namespace.
func Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

// BoolValue is 1 for true and 0 for false.
func BoolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ComponentStats are cs's counters in pkg/termrun's form, the form of a shard's
// work too (WorkDescs).
func ComponentStats(cs lifecycle.ComponentStatus) termrun.Stats {
	return termrun.Stats{Started: cs.Starts, Failed: cs.Failures, Overstays: cs.Overstays, Panicked: cs.Panics}
}
