package reference_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/metrics"
	"github.com/baton-dev/baton/pkg/controller/metrics/reference"
)

// The reference controller's metrics are registered beside the core's.
func ExampleNewCollector() {
	handler := &fakeConfig{st: configchange.Stats{Validated: 3, Invalid: 1, CurrentInvalid: true}}
	m, err := metrics.New(metrics.Sources{}, metrics.Options{
		Collectors: []prometheus.Collector{reference.NewCollector(reference.Sources{Config: handler})},
	})
	if err != nil {
		panic(err)
	}
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() == "baton_config_invalid" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// baton_config_invalid 1
}
