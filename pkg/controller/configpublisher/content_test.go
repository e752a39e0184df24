package configpublisher_test

import (
	"testing"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/events"
)

// TestRenderedContentReusesPrevious: a render with the output and versions
// of Inputs.Previous gives Previous itself (a new term's render of
// unchanged inputs costs no new Payload); any difference gives a new
// Payload holding the render, and Previous is left as it was.
func TestRenderedContentReusesPrevious(t *testing.T) {
	prev := &configpublisher.Payload{
		Data: map[string]string{configpublisher.KeyRendered: "global\n"}, ConfigVersion: "v1", PodGeneration: 3,
	}
	for _, tc := range []struct {
		name    string
		content configpublisher.RenderedContent
		render  *events.TemplateRenderedEvent
		prev    *configpublisher.Payload
		reuse   bool
	}{
		{"same render, new term", configpublisher.RenderedContent{}, events.NewTemplateRenderedEvent("global\n", "v1", 3, 9), prev, true},
		{"no previous", configpublisher.RenderedContent{}, events.NewTemplateRenderedEvent("global\n", "v1", 3, 9), nil, false},
		{"output", configpublisher.RenderedContent{}, events.NewTemplateRenderedEvent("global2\n", "v1", 3, 9), prev, false},
		{"config version", configpublisher.RenderedContent{}, events.NewTemplateRenderedEvent("global\n", "v2", 3, 9), prev, false},
		{"pod generation", configpublisher.RenderedContent{}, events.NewTemplateRenderedEvent("global\n", "v1", 4, 9), prev, false},
		{"key", configpublisher.RenderedContent{Key: "other.cfg"}, events.NewTemplateRenderedEvent("global\n", "v1", 3, 9), prev, false},
		{"extra key", configpublisher.RenderedContent{}, events.NewTemplateRenderedEvent("global\n", "v1", 3, 9),
			&configpublisher.Payload{Data: map[string]string{configpublisher.KeyRendered: "global\n", "x": ""}, ConfigVersion: "v1", PodGeneration: 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.content.Build(configpublisher.Inputs{Rendered: tc.render, Previous: tc.prev})
			if err != nil || b.Payload == nil {
				t.Fatalf("Build = %+v, %v", b, err)
			}
			if reused := b.Payload == tc.prev; reused != tc.reuse {
				t.Fatalf("Previous returned: %v, want %v", reused, tc.reuse)
			}
			key := tc.content.Key
			if key == "" {
				key = configpublisher.KeyRendered
			}
			p := b.Payload
			if len(p.Data) != 1 || p.Data[key] != tc.render.Output || p.ConfigVersion != tc.render.ConfigVersion ||
				p.PodGeneration != tc.render.PodGeneration {
				t.Errorf("payload %+v does not hold the render %+v", p, tc.render)
			}
			if prev.Data[configpublisher.KeyRendered] != "global\n" || prev.ConfigVersion != "v1" || prev.PodGeneration != 3 {
				t.Errorf("Build changed Previous: %+v", prev)
			}
		})
	}
}
