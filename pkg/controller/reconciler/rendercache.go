package reconciler

import (
	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
)

// renderKey identifies the input of a pipeline run for the render cache:
// the configuration version and the pod generation, and the configuration
// and pod set themselves (by identity). The versions alone would do for
// the reference components, which give every new configuration content a
// new version and every new pod set a greater generation; the identities
// make sure that two inputs sharing versions but not content are never
// taken for one another. A replay hands out the very events it cached, so
// a new term whose inputs did not change finds its key.
type renderKey struct {
	configVersion string
	podGeneration uint64
	config        *config.Config
	pods          *config.Pod // the first pod, nil for none
	podCount      int
}

// renderKeyOf returns the key of the input made of cfg and pods, both
// non-nil.
func renderKeyOf(cfg *events.ConfigValidatedEvent, pods *events.HAProxyPodsDiscoveredEvent) renderKey {
	k := renderKey{configVersion: cfg.Version, podGeneration: pods.Generation, config: cfg.Config, podCount: len(pods.Pods)}
	if len(pods.Pods) > 0 {
		k.pods = &pods.Pods[0]
	}
	return k
}

// renderCache holds the outcome of the last pipeline run that returned no
// error (valid or not). It is one entry: a new term renders the input the
// last one ended with, and a change of either input makes a new key.
type renderCache struct {
	key renderKey
	res pipeline.Result
	ok  bool
}

// get returns the outcome cached for k. It is a Result as the run returned
// it but for the durations, which are zero: nothing was rendered.
func (c *renderCache) get(k renderKey) (pipeline.Result, bool) {
	if !c.ok || c.key != k {
		return pipeline.Result{}, false
	}
	res := c.res
	res.RenderDuration, res.ValidateDuration = 0, 0
	return res, true
}

// put makes res, the outcome of a run on k that returned no error, the
// cached one.
func (c *renderCache) put(k renderKey, res pipeline.Result) {
	c.key, c.res, c.ok = k, res, true
}
