package configchange

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// Name is the component name of a ConfigChangeHandler.
const Name = "config-change-handler"

// SourceUpdate is the Source name of documents pushed with Update.
const SourceUpdate = "update"

// Errors of the package.
var (
	// ErrAlreadyStarted is returned by a second call to Start.
	ErrAlreadyStarted = errors.New("configchange: handler already started")
	// ErrSourcePanicked is wrapped by Start's error when the source's Run
	// panicked: the panic is recovered, logged with its stack, and fails the
	// handler (an all-replica failure, which makes the replica unhealthy).
	ErrSourcePanicked = errors.New("configchange: source panicked")
	// ErrStopped is returned by Update once Start has returned.
	ErrStopped = errors.New("configchange: handler stopped")
)

// Options configure a ConfigChangeHandler.
type Options struct {
	// Source supplies the documents. Required.
	Source Source
	// Logger receives the handler's log lines; nil means slog.Default().
	Logger *slog.Logger
}

// Stats counts what the handler processed, for metrics and status pages.
type Stats struct {
	// Validated counts documents published as ConfigValidatedEvent.
	Validated uint64
	// Invalid counts documents published as ConfigInvalidEvent.
	Invalid uint64
	// Unchanged counts documents equal to the one processed before them,
	// which were not published again.
	Unchanged uint64
	// CurrentVersion and CurrentSource describe the configuration in force
	// (the last valid one); empty before any.
	CurrentVersion string
	CurrentSource  string
	// LastInvalidReason joins the errors of the last invalid document with
	// "; "; LastInvalidVersion and LastInvalidAt go with it. Empty and zero
	// before any.
	LastInvalidReason  string
	LastInvalidVersion string
	LastInvalidAt      time.Time
	// CurrentInvalid is true when the last document processed was invalid.
	CurrentInvalid bool
}

// ConfigChangeHandler validates configuration documents and publishes the
// outcome. Create one with New; it is a lifecycle.Component to register as
// all-replica.
type ConfigChangeHandler struct {
	bus     *busevents.EventBus
	source  Source
	logger  *slog.Logger
	valid   *leadership.StateReplayer[*events.ConfigValidatedEvent]
	invalid *leadership.StateReplayer[*events.ConfigInvalidEvent]

	requests chan request
	started  atomic.Bool
	synced   atomic.Bool
	done     chan struct{} // closed when Start returns

	// lastKey is the outcome and version of the last document processed;
	// only Start's goroutine touches it.
	lastKey string

	// mu guards stats.
	mu    sync.Mutex
	stats Stats
}

// request is one document waiting to be processed.
type request struct {
	doc    Document
	source string
	reply  chan outcome // buffered 1; nil when nobody waits
}

// outcome is what processing a document gave.
type outcome struct {
	version string
	err     error
}

// New returns a handler that publishes on bus. It subscribes to nothing.
func New(bus *busevents.EventBus, opts Options) (*ConfigChangeHandler, error) {
	if bus == nil {
		return nil, errors.New("configchange: bus is nil")
	}
	if opts.Source == nil {
		return nil, errors.New("configchange: options: source is nil")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", Name)
	return &ConfigChangeHandler{
		bus:      bus,
		source:   opts.Source,
		logger:   logger,
		valid:    leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus).WithLogger(logger),
		invalid:  leadership.NewStateReplayer[*events.ConfigInvalidEvent](bus).WithLogger(logger),
		requests: make(chan request),
		done:     make(chan struct{}),
	}, nil
}

// Name returns "config-change-handler".
func (h *ConfigChangeHandler) Name() string { return Name }

// Start runs the source and processes its documents, and those pushed with
// Update, until ctx ends; it then waits for the source to return and returns
// nil. It returns an error wrapping the source's if the source fails, and
// ErrAlreadyStarted when called twice. A source that returns nil before ctx
// ends (Static, Default) has delivered all it had; the handler keeps serving
// Update.
func (h *ConfigChangeHandler) Start(ctx context.Context) error {
	if !h.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer close(h.done)
	srcDone := make(chan error, 1)
	srcName := h.source.String()
	go func() {
		var err error
		defer func() { srcDone <- err }()
		defer func() {
			// A panicking source fails the handler, not the process.
			if r := recover(); r != nil {
				h.logger.Error("configuration source panicked", "source", srcName, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = fmt.Errorf("%w: %v", ErrSourcePanicked, r)
			}
		}()
		err = h.source.Run(ctx, func(d Document) { h.submit(ctx, request{doc: d, source: srcName}) })
	}()
	for {
		select {
		case <-ctx.Done():
			if srcDone != nil {
				<-srcDone
			}
			return nil
		case req := <-h.requests:
			version, err := h.process(req.doc, req.source)
			if req.reply != nil {
				req.reply <- outcome{version: version, err: err}
			}
		case err := <-srcDone:
			srcDone = nil
			if err != nil && ctx.Err() == nil {
				h.logger.Error("configuration source failed", "source", srcName, "error", err)
				return fmt.Errorf("configchange: source %s: %w", srcName, err)
			}
		}
	}
}

// submit hands a document to Start's goroutine, giving up when ctx ends.
func (h *ConfigChangeHandler) submit(ctx context.Context, req request) {
	select {
	case h.requests <- req:
	case <-ctx.Done():
	case <-h.done:
	}
}

// Update processes raw as a document from source "update" and returns its
// version and nil if it was valid, or an error matching config.ErrInvalid
// (a *config.ValidationError or a parse error) if it was refused; either way
// the outcome was published. It waits for Start if Start has not been called,
// and returns ctx's error if ctx ends first, ErrStopped after Start returned.
func (h *ConfigChangeHandler) Update(ctx context.Context, raw []byte) (string, error) {
	reply := make(chan outcome, 1)
	select {
	case h.requests <- request{doc: Document{Raw: raw}, source: SourceUpdate, reply: reply}:
	case <-ctx.Done():
		return "", ctx.Err()
	case <-h.done:
		return "", ErrStopped
	}
	out := <-reply
	if out.err != nil {
		return "", out.err
	}
	return out.version, nil
}

// process validates one document and publishes the outcome, returning the
// document's version and its error. It runs on Start's goroutine only.
func (h *ConfigChangeHandler) process(doc Document, source string) (string, error) {
	var (
		cfg     *config.Config
		version string
		err     = doc.Err
	)
	if err == nil {
		cfg, version, err = config.Load(doc.Raw)
		if err != nil {
			version = config.RawVersion(doc.Raw)
		}
	}
	key := "valid/" + version
	if err != nil {
		key = "invalid/" + version + "/" + err.Error()
	}
	if key == h.lastKey {
		h.mu.Lock()
		h.stats.Unchanged++
		h.mu.Unlock()
		h.logger.Debug("configuration unchanged", "source", source, "version", version)
		return version, err
	}
	h.lastKey = key

	if err == nil {
		ev := events.NewConfigValidatedEvent(cfg, version, source)
		h.synced.Store(true) // before Publish: a subscriber that got the event sees Synced
		h.mu.Lock()
		h.stats.Validated++
		h.stats.CurrentVersion, h.stats.CurrentSource = version, source
		h.stats.CurrentInvalid = false
		h.mu.Unlock()
		h.valid.Publish(ev)
		h.logger.Info("configuration validated", "source", source, "version", version,
			"frontends", len(cfg.Frontends), "backends", len(cfg.Backends))
		return version, nil
	}

	reasons := config.Reasons(err)
	errs := fieldErrors(err)
	ev := events.NewConfigInvalidEvent(version, source, errs)
	h.synced.Store(true)
	h.mu.Lock()
	h.stats.Invalid++
	h.stats.LastInvalidReason = strings.Join(reasons, "; ")
	h.stats.LastInvalidVersion = version
	h.stats.LastInvalidAt = ev.Timestamp()
	h.stats.CurrentInvalid = true
	kept := h.stats.CurrentVersion
	h.mu.Unlock()
	h.invalid.Publish(ev)
	h.logger.Warn("configuration invalid; keeping the last valid one", "source", source,
		"version", version, "kept_version", kept, "errors", reasons)
	return version, err
}

// fieldErrors splits a validation error into its field errors, so that a
// ConfigInvalidEvent carries one error per problem.
func fieldErrors(err error) []error {
	var verr *config.ValidationError
	if errors.As(err, &verr) {
		return verr.Unwrap()
	}
	return []error{err}
}

// Stats returns a snapshot of the counters.
func (h *ConfigChangeHandler) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// Synced reports whether the handler has processed a first document, valid
// or not: the all-replica side's readiness for /readyz.
func (h *ConfigChangeHandler) Synced() bool { return h.synced.Load() }

// Current returns the configuration in force: the last valid event, and
// false before any.
func (h *ConfigChangeHandler) Current() (*events.ConfigValidatedEvent, bool) { return h.valid.Get() }

// Replayer returns what a new leader's term replays: the last valid
// configuration, then, if the last document processed was refused, the last
// invalid one. Its Replay reports whether a valid configuration was replayed.
func (h *ConfigChangeHandler) Replayer() lifecycle.Replayer { return replayer{h} }

type replayer struct{ h *ConfigChangeHandler }

func (r replayer) Replay() bool {
	h := r.h
	h.mu.Lock()
	invalid := h.stats.CurrentInvalid
	h.mu.Unlock()
	ok := h.valid.Replay()
	if invalid {
		h.invalid.Replay()
	}
	return ok
}
