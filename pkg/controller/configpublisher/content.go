package configpublisher

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/pkg/controller/events"
)

// Data keys written by RawContent.
const (
	KeyConfig = "config.yaml"
	KeyPods   = "pods.yaml"
)

// Inputs is the state the publisher holds in a term: the newest event of
// each type it was given, nil until one arrived.
type Inputs struct {
	Config *events.ConfigValidatedEvent
	Pods   *events.HAProxyPodsDiscoveredEvent
}

// Content builds the published data from the inputs. It is the seam where
// what is published is chosen: RawContent publishes the validated
// configuration and the pods; a rendered output (the render-validate
// pipeline's TemplateRenderedEvent) is published by a Content that reads it
// from Inputs once Inputs carries it.
type Content interface {
	// Build returns the payload for in, or ok false when in lacks something
	// it needs; an error means the inputs cannot be published.
	Build(in Inputs) (p Payload, ok bool, err error)
}

// RawContent publishes the validated configuration as YAML under KeyConfig
// and the pods it was published for under KeyPods. It needs both inputs.
type RawContent struct{}

// Build implements Content.
func (RawContent) Build(in Inputs) (Payload, bool, error) {
	if in.Config == nil || in.Pods == nil {
		return Payload{}, false, nil
	}
	cfg, err := yaml.Marshal(in.Config.Config)
	if err != nil {
		return Payload{}, false, fmt.Errorf("configpublisher: marshal config %s: %w", in.Config.Version, err)
	}
	pods, err := yaml.Marshal(in.Pods.Pods)
	if err != nil {
		return Payload{}, false, fmt.Errorf("configpublisher: marshal pods generation %d: %w", in.Pods.Generation, err)
	}
	return Payload{
		Data:          map[string]string{KeyConfig: string(cfg), KeyPods: string(pods)},
		ConfigVersion: in.Config.Version,
		PodGeneration: in.Pods.Generation,
	}, true, nil
}
