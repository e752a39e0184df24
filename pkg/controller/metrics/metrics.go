package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// Namespace prefixes every metric name.
const Namespace = "baton"

// ErrNilCollector is returned by New for a nil entry of Options.Collectors.
var ErrNilCollector = errors.New("metrics: nil collector")

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
// *k8sle.Elector (the adapter's Elector()) satisfies it.
type Election interface {
	IsLeader() bool
	Term() uint64
}

// ElectionCounters are the elector's counters of bad input from the cluster and
// of takeovers on the death signal, as k8sle.Stats has them under the same names.
type ElectionCounters struct {
	// OutOfRange counts values read from the Lease outside what Baton writes.
	OutOfRange uint64
	// DuplicateIdentity counts writes of the Lease in this replica's name that
	// it did not make.
	DuplicateIdentity uint64
	// DeathTakeovers counts the terms this replica started by taking the Lease
	// from a holder whose container the kubelet reported terminated.
	DeathTakeovers uint64
}

// Sources are read each time the metrics are gathered. A nil source leaves
// its metrics out.
type Sources struct {
	Bus      BusStats
	Runtime  RuntimeStatus
	Election Election
	// ElectionCounters returns the elector's counters, for example
	// func() ElectionCounters { s := el.Stats(); return ElectionCounters{s.OutOfRange, s.DuplicateIdentity, s.DeathTakeovers} }.
	ElectionCounters func() ElectionCounters
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
	// Collectors are registered in the same registry, after the core's: the
	// place for an application's own metrics (the reference controller's
	// are in pkg/controller/metrics/reference). Nil entries are an error.
	Collectors []prometheus.Collector
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
	cs = append(cs, opts.Collectors...)
	var errs []error
	for i, c := range cs {
		if c == nil {
			errs = append(errs, fmt.Errorf("%w: Options.Collectors[%d]", ErrNilCollector, i-(len(cs)-len(opts.Collectors))))
			continue
		}
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
