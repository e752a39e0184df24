// Package reference holds the reference controller's own metrics, beside
// the generic ones of pkg/controller/metrics: the configuration handler's
// documents and the ConfigPublisher's writes.
//
// # Usage
//
//	m, err := metrics.New(metrics.Sources{Bus: bus, Runtime: manager, Election: elector}, metrics.Options{
//		Collectors: []prometheus.Collector{reference.NewCollector(reference.Sources{Config: handler, Publisher: publisher})},
//	})
//
// # Metrics
//
//	baton_config_documents_total{outcome="validated"|"invalid"|"unchanged"}
//	baton_config_invalid                       1 while the newest document was refused
//	baton_publisher_writes_total{result="written"|"unchanged"|"conflict"|"stale_term"|"failed"}
//	baton_publisher_fenced                     1 while the publisher's term was fenced off by a newer one
//
// # Layers
//
// This package is on the reference side: it imports configchange and
// configpublisher. The generic metrics package never imports it.
//
// # Concurrency properties
//
// The collector reads its sources at scrape time through their snapshot
// methods, which take only their own short locks; it is safe for concurrent
// use.
package reference
