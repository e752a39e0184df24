package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
)

var (
	// ErrNilConfig is returned by Execute when the input has no
	// configuration: the pipeline never renders from nothing.
	ErrNilConfig = errors.New("pipeline: input config is nil")
	// ErrCanceled wraps the context's error when Execute is asked to run,
	// or to go on to validation, under a context that is already done.
	ErrCanceled = errors.New("pipeline: canceled")
	// ErrRender wraps an error from the Renderer: no output was produced.
	ErrRender = errors.New("pipeline: render failed")
	// ErrValidator wraps an error from the Validator: it could not judge
	// the output (as opposed to finding errors in it, see Result.Errors).
	ErrValidator = errors.New("pipeline: validator failed")
	// ErrInvalidOutput is wrapped by Result.Err when the validator found
	// errors in the rendered output.
	ErrInvalidOutput = errors.New("pipeline: rendered output is invalid")
)

// Input is what one execution renders from: the last valid configuration
// and the discovered pods, with the versions they were published under.
// The pipeline only reads it; Config and Pods may be shared with events.
type Input struct {
	Config        *config.Config // required
	ConfigVersion string         // ConfigValidatedEvent.Version, carried into Result
	Pods          []config.Pod   // every discovered pod; the renderer picks the ready ones
	PodGeneration uint64         // HAProxyPodsDiscoveredEvent.Generation, carried into Result
}

// Renderer produces the output configuration text from an input. It must
// not modify the input. Implementations used by a shared Pipeline must be
// safe for concurrent use.
type Renderer interface {
	Render(ctx context.Context, in Input) (string, error)
}

// Validator judges a rendered output. findings lists what is wrong with
// the output (nil or empty: valid); err says the validator could not do its
// job at all (a checker that failed to run), and then findings are ignored.
// Implementations used by a shared Pipeline must be safe for concurrent use.
type Validator interface {
	Validate(ctx context.Context, output string) (findings []error, err error)
}

// RendererFunc adapts a function to Renderer.
type RendererFunc func(ctx context.Context, in Input) (string, error)

// Render calls f.
func (f RendererFunc) Render(ctx context.Context, in Input) (string, error) { return f(ctx, in) }

// ValidatorFunc adapts a function to Validator.
type ValidatorFunc func(ctx context.Context, output string) ([]error, error)

// Validate calls f.
func (f ValidatorFunc) Validate(ctx context.Context, output string) ([]error, error) {
	return f(ctx, output)
}

// Result is the outcome of one execution that ran to the end.
type Result struct {
	// Output is the rendered configuration text. It is set whenever the
	// render succeeded, also when validation then found errors; only a
	// Result with Valid() true may be published as the live output.
	Output string
	// ConfigVersion and PodGeneration are copied from the Input, so the
	// output can be traced to the state it was built from.
	ConfigVersion string
	PodGeneration uint64
	// Errors are the validator's findings; the reference validator gives
	// LineError values in line order.
	Errors []error
	// RenderDuration and ValidateDuration are how long each step took.
	RenderDuration   time.Duration
	ValidateDuration time.Duration
}

// Valid reports whether the output passed validation.
func (r Result) Valid() bool { return len(r.Errors) == 0 }

// Err returns nil for a valid result, otherwise an error wrapping
// ErrInvalidOutput and every finding (errors.Is and errors.As see them).
func (r Result) Err() error {
	if r.Valid() {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidOutput, errors.Join(r.Errors...))
}

// Pipeline renders then validates, synchronously, on the caller's
// goroutine. Create one with New or NewDefault.
type Pipeline struct {
	renderer  Renderer
	validator Validator
}

// New returns a pipeline of the given steps. Both are required.
func New(renderer Renderer, validator Validator) (*Pipeline, error) {
	switch {
	case renderer == nil:
		return nil, errors.New("pipeline: renderer is nil")
	case validator == nil:
		return nil, errors.New("pipeline: validator is nil")
	}
	return &Pipeline{renderer: renderer, validator: validator}, nil
}

// NewDefault returns the reference pipeline: DefaultRenderer (the built-in
// HAProxy template) followed by HAProxyValidator.
func NewDefault() *Pipeline {
	return &Pipeline{renderer: DefaultRenderer(), validator: HAProxyValidator{}}
}

// Execute renders the output from in and validates it, and returns when
// both steps are done. An error means the pipeline could not produce a
// judged output: ErrNilConfig, ErrCanceled (the context was done before
// rendering or before validating), ErrRender or ErrValidator, each wrapping
// the cause. Validation findings are not an error: they are in
// Result.Errors (see Result.Valid and Result.Err). The returned Result
// always carries the input versions, and the output once rendered.
//
// Execute is safe for concurrent use when the steps are; the reference
// steps are.
func (p *Pipeline) Execute(ctx context.Context, in Input) (Result, error) {
	res := Result{ConfigVersion: in.ConfigVersion, PodGeneration: in.PodGeneration}
	if in.Config == nil {
		return res, ErrNilConfig
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("%w before render: %w", ErrCanceled, err)
	}
	start := time.Now()
	out, err := p.renderer.Render(ctx, in)
	res.RenderDuration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrRender, err)
	}
	res.Output = out
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("%w before validate: %w", ErrCanceled, err)
	}
	start = time.Now()
	findings, err := p.validator.Validate(ctx, out)
	res.ValidateDuration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrValidator, err)
	}
	if len(findings) > 0 {
		res.Errors = findings
	}
	return res, nil
}
