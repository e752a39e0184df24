package controllerruntime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// How a controller left on the manager New was given is found (the gauge of
// controller-runtime's registry, compared per process) is in
// docs/design/controllerruntime.md, # A controller left on the manager.

// workerCountMetric is the gauge every controller-runtime controller sets, labelled
// "controller" with its name, when it starts. A controller-runtime that renames it
// turns this check off; TestControllerLeftOnManagerStopsTheRuntime fails then.
const workerCountMetric = "controller_runtime_max_concurrent_reconciles"

// strayCheckFor is how long after the manager started its leader-election runnables
// the Runtime looks for controllers left on the manager, every strayCheckEvery; they
// set their gauge as the first step of their Start, so they show at once.
const (
	strayCheckFor   = 5 * time.Second
	strayCheckEvery = 250 * time.Millisecond
)

// controllerCensus is what the Runtimes of this process know of the controllers
// in controller-runtime's registry.
type controllerCensus struct {
	// mu guards known and allReplica.
	mu         sync.Mutex
	known      map[string]bool // names of the controllers Runtimes run
	allReplica int             // controllers Runtime.Manager accepted as all-replica
}

var census = controllerCensus{known: map[string]bool{}}

// runs records a controller a Runtime runs under name.
func (c *controllerCensus) runs(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known[name] = true
}

// addedAllReplica records run if it is a controller Runtime.Manager accepted.
func (c *controllerCensus) addedAllReplica(run manager.Runnable) {
	if _, ok := run.(controller.Controller); !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.allReplica++
}

// strays returns the controllers of running that are not known nor in before, when
// there are more of them than all-replica controllers were accepted.
func (c *controllerCensus) strays(running []string, before map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var unknown []string
	for _, name := range running {
		if !c.known[name] && !before[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) <= c.allReplica {
		return nil
	}
	return unknown
}

// runningControllers returns the names of the controllers controller-runtime's
// registry has a workerCountMetric for.
func runningControllers() map[string]bool {
	names := map[string]bool{}
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return names // a partial gather still lists what it could
	}
	for _, f := range families {
		if f.GetName() != workerCountMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					names[l.GetValue()] = true
				}
			}
		}
	}
	return names
}

// checkLeftOnManager waits until mgr started its leader-election runnables, then
// looks for controllers left on it for strayCheckFor. It returns
// ErrControllerLeftOnManager naming them, or nil when it found none or ctx ended.
func checkLeftOnManager(ctx context.Context, mgr manager.Manager, before map[string]bool) error {
	select {
	case <-mgr.Elected():
	case <-ctx.Done():
		return nil
	}
	tick := time.NewTicker(strayCheckEvery)
	defer tick.Stop()
	deadline := time.After(strayCheckFor)
	for {
		running := runningControllers()
		if strays := census.strays(slices.Sorted(maps.Keys(running)), before); strays != nil {
			return fmt.Errorf("%w: %s run on this replica, not started by Baton: a controller built with "+
				"ctrl.NewControllerManagedBy(mgr) on the manager given to New runs on every replica, outside any "+
				"term, unfenced. Set mgr = rt.Manager() right after New and build leader-only controllers with "+
				"controllerruntime.NewControllerManagedBy(mgr); a controller meant for every replica is added "+
				"through rt.Manager() with NeedLeaderElection false",
				ErrControllerLeftOnManager, strings.Join(strays, ", "))
		}
		select {
		case <-tick.C:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
