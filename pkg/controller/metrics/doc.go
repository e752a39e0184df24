// Package metrics exposes the generic state of a Baton replica as Prometheus
// metrics and health checks: the bus, the election, the runtime's terms and
// components.
//
// # Usage
//
//	m, err := metrics.New(metrics.Sources{Bus: bus, Runtime: manager, Election: adapter.Elector()}, metrics.Options{
//		Collectors: []prometheus.Collector{appCollector}, // an application's own, optional
//	})
//	lifecycle.Options{OnTermReady: func(r lifecycle.TermReport) { m.ObserveTermReady(r.Latency) }}
//	http.Handle("/metrics", m.Handler())
//	http.Handle("/healthz", metrics.CheckHandler(src.Healthy))
//
// # Read at scrape time
//
// Most metrics are not counted here: a custom collector reads the counters
// the components already keep (the bus's Stats, the runtime's Status, the
// elector's IsLeader and Term) each time the registry is gathered, so there
// is one source of truth and nothing to keep in step. Only the two latency
// histograms, which need every observation rather than a running total, are
// recorded as events happen, through ObserveTermReady and ObserveHandover.
//
// # Health
//
// Sources.Healthy joins the core's health checks (the runtime's Status and
// the elector's Healthy), and CheckHandler serves any check as /healthz or
// /readyz: 200 "ok", or 503 with the reasons.
//
// # Metrics
//
//	baton_is_leader                            1 while this replica leads (by its own clock)
//	baton_term                                 the current term, 0 while not leading
//	baton_leadership_transitions_total{transition="acquired"|"lost"}
//	baton_terms_ready_total                    terms that became ready
//	baton_term_ready                           1 while the current term is ready
//	baton_replays_total{type}                  state replays, per event type
//	baton_bus_delivered_total{subscriber,type} events queued for each subscriber
//	baton_bus_dropped_total{subscriber,type}   events a subscriber lost to a full buffer
//	baton_bus_skipped_total{subscriber,type}   superseded state skipped for a newer version
//	baton_bus_rejected_total{reason}           nil events and events published after stop
//	baton_component_up{component,leader_only}  1 while the component runs
//	baton_component_failed{component,leader_only} 1 while the component's last run failed
//	baton_component_starts_total{component}
//	baton_component_failures_total{component}
//	baton_component_overstays_total{component}
//	baton_runtime_subscribe_timeouts_total, baton_runtime_hook_failures_total,
//	baton_runtime_leadership_events_dropped_total
//	baton_handover_seconds                     histogram, see ObserveHandover
//	baton_term_ready_seconds                   histogram, see ObserveTermReady
//
// Per-subscriber bus counters come from the bus's Stats().Totals, which add
// up every subscription of a name, live or ended: a leader-only component
// subscribes afresh every term, and its series still never go down.
//
// # Layers
//
// This package is in the core: it imports the bus and the runtime and
// nothing of the reference controller. An application adds its own metrics
// with Options.Collectors, using Desc, Emitter and BoolValue to read its
// sources at scrape time like the core does; the reference controller's
// (configuration documents, publisher writes) are in the subpackage
// reference.
//
// # Concurrency properties
//
// A Metrics is safe for concurrent use. Gathering calls the sources'
// snapshot methods, which take only their own short locks; the observe
// methods never block.
package metrics
