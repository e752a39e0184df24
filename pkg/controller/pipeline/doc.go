// Package pipeline is the controller's render-validate path: from the last
// valid configuration and the discovered pods to a checked HAProxy
// configuration text, in one synchronous call.
//
// # Usage
//
//	p := pipeline.NewDefault()
//	res, err := p.Execute(ctx, pipeline.Input{
//		Config: cfgEvent.Config, ConfigVersion: cfgEvent.Version,
//		Pods: podsEvent.Pods, PodGeneration: podsEvent.Generation,
//	})
//	switch {
//	case err != nil: // nothing judged: no config, canceled, or a step failed
//	case !res.Valid(): // res.Errors, one LineError per finding
//	default: // res.Output may be published
//	}
//
// # Steps
//
// Execute renders with a Renderer and then validates the rendered text with
// a Validator; both are small interfaces, replaceable through New. The
// reference Renderer, TemplateRenderer, runs a text/template over the
// configuration and the ready pods (DefaultTemplate renders global,
// defaults, one frontend per configured frontend and one backend per
// configured backend with a server line per ready pod). The reference
// Validator, HAProxyValidator, parses the text back and reports what the
// renderer can get wrong from bad or unlucky input: references to missing
// backends, empty backends, duplicate names, malformed bind and server
// lines, unknown directives; each finding is a LineError with its line.
//
// # Why it is synchronous, and not replayed
//
// A render is a pure function of its inputs, so there is no render state to
// hand over to a new leader: the leader-only reconciler.Coordinator, once it
// holds the replayed configuration and pods, runs Execute afresh. This is
// why render and validation events are never replayed.
//
// # Concurrency properties
//
// Execute runs on the caller's goroutine, starts none, and keeps no state
// between calls; it is safe for concurrent use when its steps are, and the
// reference steps are. It checks the context before each step; a step may
// check it too. Inputs are only read: they may be shared with events.
package pipeline
