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
// Metrics are read from the components' own counters at scrape time; only the two
// latency histograms are recorded as events happen (ObserveTermReady,
// ObserveHandover). An application adds its own with Options.Collectors, using
// Desc, Emitter and BoolValue; the reference controller's are in the subpackage
// reference. Why is in docs/design/metrics.md in the repository.
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
// # Concurrency properties
//
// A Metrics is safe for concurrent use. Gathering calls the sources'
// snapshot methods, which take only their own short locks; the observe
// methods never block.
package metrics
