package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-dev/baton/pkg/termrun"
)

// WorkDescs describe the counters of one component or leader-only work, the same
// for the single leader's components (lifecycle.Status) and for a shard's works
// (sharding.Workers, whose counters are pkg/termrun's): baton_component_starts_total,
// baton_component_failures_total, baton_component_overstays_total and
// baton_component_panics_total, labelled component. Create them with
// NewWorkDescs.
type WorkDescs struct {
	starts, failures, overstays, panics *prometheus.Desc
}

// NewWorkDescs returns the descriptors.
func NewWorkDescs() WorkDescs {
	return WorkDescs{
		starts:    Desc("component_starts_total", "Runs of the component started (a restart in a term counts again).", "component"),
		failures:  Desc("component_failures_total", "Runs of the component that failed (an error, an early return or a panic).", "component"),
		overstays: Desc("component_overstays_total", "Runs of the component that did not stop within the runtime's stop timeout.", "component"),
		panics:    Desc("component_panics_total", "Runs of the component that failed by a panic.", "component"),
	}
}

// Describe sends the descriptors.
func (d WorkDescs) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.starts
	ch <- d.failures
	ch <- d.overstays
	ch <- d.panics
}

// Emit sends the counters st of the component or work named component.
func (d WorkDescs) Emit(e Emitter, component string, st termrun.Stats) {
	e.Counter(d.starts, st.Started, component)
	e.Counter(d.failures, st.Failed, component)
	e.Counter(d.overstays, st.Overstays, component)
	e.Counter(d.panics, st.Panicked, component)
}
