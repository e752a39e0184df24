package reference

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/metrics"
)

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
	// Config gives baton_config_documents_total and baton_config_invalid.
	Config ConfigStats
	// Publisher gives baton_publisher_writes_total and
	// baton_publisher_fenced.
	Publisher PublisherState
}

// NewCollector returns a collector of the reference controller's metrics,
// to register beside the core's (metrics.Options.Collectors).
func NewCollector(src Sources) prometheus.Collector {
	return &collector{
		src:           src,
		configDocs:    metrics.Desc("config_documents_total", "Configuration documents processed, by outcome.", "outcome"),
		configInvalid: metrics.Desc("config_invalid", "1 while the newest configuration document was refused (the last valid one stays in force), else 0."),
		pubWrites:     metrics.Desc("publisher_writes_total", "Writes of the published object this replica's ConfigPublisher attempted, by result.", "result"),
		pubFenced:     metrics.Desc("publisher_fenced", "1 while the ConfigPublisher's current term was refused by a newer term's write (fenced), else 0."),
	}
}

type collector struct {
	src                                             Sources
	configDocs, configInvalid, pubWrites, pubFenced *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.configDocs
	ch <- c.configInvalid
	ch <- c.pubWrites
	ch <- c.pubFenced
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := metrics.NewEmitter(ch)
	if cfg := c.src.Config; cfg != nil {
		st := cfg.Stats()
		e.Counter(c.configDocs, st.Validated, "validated")
		e.Counter(c.configDocs, st.Invalid, "invalid")
		e.Counter(c.configDocs, st.Unchanged, "unchanged")
		e.Gauge(c.configInvalid, metrics.BoolValue(st.CurrentInvalid))
	}
	if p := c.src.Publisher; p != nil {
		st := p.State()
		e.Counter(c.pubWrites, st.Writes, "written")
		e.Counter(c.pubWrites, st.Unchanged, "unchanged")
		e.Counter(c.pubWrites, st.Conflicts, "conflict")
		e.Counter(c.pubWrites, st.StaleRefusals, "stale_term")
		e.Counter(c.pubWrites, st.Failures, "failed")
		e.Gauge(c.pubFenced, metrics.BoolValue(st.Running && st.Fenced))
	}
}
