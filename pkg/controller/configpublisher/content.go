package configpublisher

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/pkg/controller/events"
)

// Data keys written by the Contents of this package.
const (
	KeyConfig   = "config.yaml"
	KeyPods     = "pods.yaml"
	KeyRendered = "haproxy.cfg"
)

// Inputs is the state the publisher holds in a term: the newest event of
// each type it was given, nil until one arrived.
type Inputs struct {
	Config *events.ConfigValidatedEvent
	Pods   *events.HAProxyPodsDiscoveredEvent
	// Rendered is the newest render of this term. RenderFailed is the
	// newest failed validation of a render if it came after Rendered, nil
	// otherwise. Renders are never replayed: both are nil at the start of a
	// term until the term's Coordinator renders.
	Rendered     *events.TemplateRenderedEvent
	RenderFailed *events.ValidationFailedEvent
	// Previous is the Payload the Content's last Build for this publisher
	// returned, in this term or an earlier one; nil before the first. A
	// Content may return it again when what it would build is the same, so
	// that an unchanged content costs nothing (a new term renders again,
	// and the render cache gives the same output). Nobody modifies a
	// Payload once built.
	Previous *Payload
}

// Built is what a Content makes of the inputs.
type Built struct {
	// Payload is the content to publish; nil when the inputs give none yet,
	// and the object keeps the content it has.
	Payload *Payload
	// Reasons, when not empty, say why the newest content could not be
	// built; the object is marked invalid with them and keeps the last good
	// content. InvalidVersion names the input that failed.
	Reasons        []string
	InvalidVersion string
}

// Content builds the published data from the inputs. It is the seam where
// what is published is chosen: RawContent publishes the validated
// configuration and the pods, RenderedContent the output of the
// render-validate pipeline.
type Content interface {
	Build(in Inputs) (Built, error)
}

// RawContent publishes the validated configuration as YAML under KeyConfig
// and the pods it was published for under KeyPods. It needs both inputs and
// ignores renders.
type RawContent struct{}

// Build implements Content.
func (RawContent) Build(in Inputs) (Built, error) {
	if in.Config == nil || in.Pods == nil {
		return Built{}, nil
	}
	cfg, err := yaml.Marshal(in.Config.Config)
	if err != nil {
		return Built{}, fmt.Errorf("configpublisher: marshal config %s: %w", in.Config.Version, err)
	}
	pods, err := yaml.Marshal(in.Pods.Pods)
	if err != nil {
		return Built{}, fmt.Errorf("configpublisher: marshal pods generation %d: %w", in.Pods.Generation, err)
	}
	return Built{Payload: &Payload{
		Data:          map[string]string{KeyConfig: string(cfg), KeyPods: string(pods)},
		ConfigVersion: in.Config.Version,
		PodGeneration: in.Pods.Generation,
	}}, nil
}

// RenderedContent publishes the newest valid render of the term under Key
// (KeyRendered when empty), with the input versions it was rendered from. A
// render that failed validation after it marks the object invalid with the
// validator's errors; the last valid render stays. It returns
// Inputs.Previous when that holds the same output and versions.
type RenderedContent struct {
	Key string
}

// Build implements Content.
func (c RenderedContent) Build(in Inputs) (Built, error) {
	key := c.Key
	if key == "" {
		key = KeyRendered
	}
	var b Built
	if r := in.Rendered; r != nil {
		b.Payload = in.Previous
		if !holds(b.Payload, key, r) {
			b.Payload = &Payload{
				Data:          map[string]string{key: r.Output},
				ConfigVersion: r.ConfigVersion,
				PodGeneration: r.PodGeneration,
			}
		}
	}
	if f := in.RenderFailed; f != nil {
		b.Reasons = make([]string, len(f.Errors))
		for i, err := range f.Errors {
			b.Reasons[i] = err.Error()
		}
		if len(b.Reasons) == 0 {
			b.Reasons = []string{"rendered output failed validation"}
		}
		b.InvalidVersion = fmt.Sprintf("render-%s-%d", f.ConfigVersion, f.PodGeneration)
	}
	return b, nil
}

// holds reports whether p is the content of render r under key alone.
func holds(p *Payload, key string, r *events.TemplateRenderedEvent) bool {
	if p == nil || p.ConfigVersion != r.ConfigVersion || p.PodGeneration != r.PodGeneration || len(p.Data) != 1 {
		return false
	}
	out, ok := p.Data[key]
	return ok && out == r.Output
}
