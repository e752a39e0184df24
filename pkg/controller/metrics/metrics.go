package metrics

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// Namespace prefixes every metric name.
const Namespace = "baton"

// BusStats is what the collector reads from the event bus;
// *busevents.EventBus satisfies it.
type BusStats interface {
	Stats() busevents.Stats
}

// RuntimeStatus is what the collector reads from the controller runtime;
// *lifecycle.Manager satisfies it.
type RuntimeStatus interface {
	Status() lifecycle.Status
}

// Election is what the collector reads from the elector;
// *leaderelection.Component satisfies it.
type Election interface {
	IsLeader() bool
	Term() uint64
}

// ConfigStats is what the collector reads from the configuration handler;
// *configchange.ConfigChangeHandler satisfies it.
type ConfigStats interface {
	Stats() configchange.Stats
}

// PublisherState is what the collector reads from the ConfigPublisher;
// *configpublisher.Component satisfies it.
type PublisherState interface {
	State() configpublisher.State
}

// Sources are read each time the metrics are gathered. A nil source leaves
// its metrics out.
type Sources struct {
	Bus      BusStats
	Runtime  RuntimeStatus
	Election Election
	Config   ConfigStats
	// Publisher gives baton_publisher_writes_total and
	// baton_publisher_fenced.
	Publisher PublisherState
}

// Options configure New. The zero value takes the defaults written on each
// field.
type Options struct {
	// TermReadyBuckets are the upper bounds, in seconds, of
	// baton_term_ready_seconds; nil means DefaultTermReadyBuckets.
	TermReadyBuckets []float64
	// HandoverBuckets are those of baton_handover_seconds; nil means
	// DefaultHandoverBuckets.
	HandoverBuckets []float64
	// ProcessMetrics adds the Go runtime and process collectors (go_*,
	// process_*), for a process that serves one replica.
	ProcessMetrics bool
}

// Default histogram buckets, in seconds.
var (
	// DefaultTermReadyBuckets span 50µs to about 13s: a term is usually
	// ready well under a millisecond after the lease was acquired.
	DefaultTermReadyBuckets = prometheus.ExponentialBuckets(50e-6, 4, 10)
	// DefaultHandoverBuckets span 50ms to about 100s, the scale of lease
	// durations.
	DefaultHandoverBuckets = prometheus.ExponentialBuckets(0.05, 2, 12)
)

// Metrics is one replica's registry: the collector reading the sources and
// the two latency histograms. Create it with New.
type Metrics struct {
	registry  *prometheus.Registry
	termReady prometheus.Histogram
	handover  prometheus.Histogram
}

// New returns the metrics of one replica, registered in a registry of their
// own.
func New(src Sources, opts Options) (*Metrics, error) {
	trb, hb := opts.TermReadyBuckets, opts.HandoverBuckets
	if trb == nil {
		trb = DefaultTermReadyBuckets
	}
	if hb == nil {
		hb = DefaultHandoverBuckets
	}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		termReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "term_ready_seconds",
			Help:      "Time from the acquisition of the lease to the moment every leader-only component held the state it needs, per term led by this replica.",
			Buckets:   trb,
		}),
		handover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "handover_seconds",
			Help:      "Time from the previous holder's last renew (or release) recorded on the lease to its acquisition by this replica, per takeover; measured with the two holders' wall clocks.",
			Buckets:   hb,
		}),
	}
	cs := []prometheus.Collector{newCollector(src), m.termReady, m.handover}
	if opts.ProcessMetrics {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	var errs []error
	for _, c := range cs {
		if err := m.registry.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("metrics: register"), err)
	}
	return m, nil
}

// ObserveTermReady records the term-ready latency of one term (a
// lifecycle.TermReport's Latency). Negative durations are recorded as 0.
func (m *Metrics) ObserveTermReady(d time.Duration) { m.termReady.Observe(max(d, 0).Seconds()) }

// ObserveHandover records the handover time of one takeover. Negative
// durations (clock skew between two holders) are recorded as 0.
func (m *Metrics) ObserveHandover(d time.Duration) { m.handover.Observe(max(d, 0).Seconds()) }

// Registry returns the registry, to gather from or to register more
// collectors with.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// collector reads the sources at scrape time.
type collector struct {
	src Sources

	isLeader, term, transitions, termsReady, termReadyNow  *prometheus.Desc
	replays, delivered, dropped, skipped, rejected         *prometheus.Desc
	compUp, compFailed, compStarts, compFailures, compOver *prometheus.Desc
	subscribeTimeouts, hookFailures, leadershipDropped     *prometheus.Desc
	configDocs, configInvalid, pubWrites, pubFenced        *prometheus.Desc
}

func newCollector(src Sources) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return &collector{
		src:          src,
		isLeader:     d("is_leader", "1 while this replica leads, by its own clock, else 0."),
		term:         d("term", "The term this replica leads in (the lease's fencing token), 0 while it does not lead."),
		transitions:  d("leadership_transitions_total", "Leadership terms this replica's runtime started (acquired) and ended (lost).", "transition"),
		termsReady:   d("terms_ready_total", "Terms of this replica that became ready."),
		termReadyNow: d("term_ready", "1 while this replica leads and its current term is ready, else 0."),
		replays:      d("replays_total", "State replays published on the bus, per event type.", "type"),
		delivered:    d("bus_delivered_total", "Events queued for a subscriber, per subscriber and event type.", "subscriber", "type"),
		dropped:      d("bus_dropped_total", "Events a subscriber lost to a full buffer, per subscriber and event type.", "subscriber", "type"),
		skipped:      d("bus_skipped_total", "Superseded state events removed from a full buffer for a newer version, per subscriber and event type.", "subscriber", "type"),
		rejected:     d("bus_rejected_total", "Events the bus refused: nil events and events published after it stopped.", "reason"),
		compUp:       d("component_up", "1 while the component's Start runs, else 0.", "component", "leader_only"),
		compFailed:   d("component_failed", "1 while the component's last run failed, else 0.", "component", "leader_only"),
		compStarts:   d("component_starts_total", "Runs of the component started.", "component"),
		compFailures: d("component_failures_total", "Runs of the component that failed (an error, an early return or a panic).", "component"),
		compOver:     d("component_overstays_total", "Runs of the component that did not stop within the runtime's stop timeout.", "component"),
		subscribeTimeouts: d("runtime_subscribe_timeouts_total",
			"Leader-only runs that did not signal Subscribed within the runtime's subscribe timeout."),
		hookFailures:      d("runtime_hook_failures_total", "Term hooks that panicked."),
		leadershipDropped: d("runtime_leadership_events_dropped_total", "Leadership events the runtime lost to a full subscription buffer (should stay 0)."),
		configDocs:        d("config_documents_total", "Configuration documents processed, by outcome.", "outcome"),
		configInvalid:     d("config_invalid", "1 while the newest configuration document was refused (the last valid one stays in force), else 0."),
		pubWrites:         d("publisher_writes_total", "Writes of the published object this replica's ConfigPublisher attempted, by result.", "result"),
		pubFenced:         d("publisher_fenced", "1 while the ConfigPublisher's current term was refused by a newer term's write (fenced), else 0."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.isLeader, c.term, c.transitions, c.termsReady, c.termReadyNow,
		c.replays, c.delivered, c.dropped, c.skipped, c.rejected,
		c.compUp, c.compFailed, c.compStarts, c.compFailures, c.compOver,
		c.subscribeTimeouts, c.hookFailures, c.leadershipDropped,
		c.configDocs, c.configInvalid,
		c.pubWrites, c.pubFenced,
	} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	if e := c.src.Election; e != nil {
		gauge(c.isLeader, boolValue(e.IsLeader()))
		gauge(c.term, float64(e.Term()))
	}
	if r := c.src.Runtime; r != nil {
		st := r.Status()
		lost := st.Terms
		if st.Leading && lost > 0 {
			lost--
		}
		counter(c.transitions, st.Terms, "acquired")
		counter(c.transitions, lost, "lost")
		counter(c.termsReady, st.ReadyTerms)
		gauge(c.termReadyNow, boolValue(st.Leading && st.TermReady))
		counter(c.subscribeTimeouts, st.SubscribeTimeouts)
		counter(c.hookFailures, st.HookFailures)
		counter(c.leadershipDropped, st.LeadershipDropped)
		for _, cs := range st.Components {
			lo := strconv.FormatBool(cs.LeaderOnly)
			gauge(c.compUp, boolValue(cs.State == lifecycle.StateRunning), cs.Name, lo)
			gauge(c.compFailed, boolValue(cs.State == lifecycle.StateFailed), cs.Name, lo)
			counter(c.compStarts, cs.Starts, cs.Name)
			counter(c.compFailures, cs.Failures, cs.Name)
			counter(c.compOver, cs.Overstays, cs.Name)
		}
	}
	if b := c.src.Bus; b != nil {
		st := b.Stats()
		for typ, n := range st.Replayed {
			counter(c.replays, n, typ)
		}
		counter(c.rejected, st.RejectedNil, "nil")
		counter(c.rejected, st.RejectedStopped, "stopped")
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
			counter(c.delivered, n, k.sub, k.typ)
		}
		for k, n := range dropped {
			counter(c.dropped, n, k.sub, k.typ)
		}
		for k, n := range skipped {
			counter(c.skipped, n, k.sub, k.typ)
		}
	}
	if cfg := c.src.Config; cfg != nil {
		st := cfg.Stats()
		counter(c.configDocs, st.Validated, "validated")
		counter(c.configDocs, st.Invalid, "invalid")
		counter(c.configDocs, st.Unchanged, "unchanged")
		gauge(c.configInvalid, boolValue(st.CurrentInvalid))
	}
	if p := c.src.Publisher; p != nil {
		st := p.State()
		counter(c.pubWrites, st.Writes, "written")
		counter(c.pubWrites, st.Unchanged, "unchanged")
		counter(c.pubWrites, st.Conflicts, "conflict")
		counter(c.pubWrites, st.StaleRefusals, "stale_term")
		counter(c.pubWrites, st.Failures, "failed")
		gauge(c.pubFenced, boolValue(st.Running && st.Fenced))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
