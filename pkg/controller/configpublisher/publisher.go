package configpublisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/store"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/fence"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Name is the component name of the publisher.
const Name = "config-publisher"

// DefaultRetryInterval is how long the publisher waits before it retries a
// write that failed (other than by fencing).
const DefaultRetryInterval = time.Second

// subscriptionBuffer holds a burst; every type is LatestValue, so the
// newest state of each always gets through.
const subscriptionBuffer = 16

var subscribed = []string{
	events.EventTypeConfigValidated,
	events.EventTypeConfigInvalid,
	events.EventTypeHAProxyPodsDiscovered,
	events.EventTypeTemplateRendered,
	events.EventTypeValidationFailed,
}

// subscribeOpts are the options of the subscription, every type
// LatestValue; made once, they cost a term nothing.
var subscribeOpts = []busevents.SubscribeOption{busevents.Types(subscribed[0], subscribed[1:]...), busevents.LatestValue()}

// Options configure a Component.
type Options struct {
	// Store keeps the published object. Required.
	Store store.Store
	// Identity, if set, is recorded on the object as its writer.
	Identity string
	// Content chooses what is published; nil means RawContent.
	Content Content
	// RetryInterval is the wait before retrying a failed write; zero means
	// DefaultRetryInterval. Negative is invalid.
	RetryInterval time.Duration
	// OnWrite, if set, is called after each write the publisher attempts,
	// successful or not, on Start's goroutine; it must not block. It is
	// meant for metrics and tests. The report's Published.Data is
	// read-only, as State's Last.Data is.
	OnWrite func(WriteReport)
	// Logger receives the component's log lines; nil means slog.Default().
	Logger *slog.Logger
	// HoldsLease, if set, reads the Lease when a write finds the object stamped with a
	// greater term: if this replica still holds it in its term, the stamp is from no
	// term of this Lease, and the write replaces it with a WARN naming the object (see
	// WriteHolding). Nil: such a write is refused with ErrStaleTerm.
	HoldsLease HoldsLease
	// LeaseToken, if set, returns the name of the Lease and this replica's token of
	// the term on it. The publisher reads it once per term, before its first write,
	// and stamps it on every write of the term (Record.Lease and Token), so that the
	// API server's fence (deploy/admission-fence.yaml) refuses a write of the term
	// that arrives after the Lease passed on. An error wrapping ErrStaleTerm (the
	// Lease is no longer this replica's in the term) fences the term as a refused
	// write does; another error is retried after RetryInterval. Nil: no token.
	LeaseToken LeaseToken
}

// LeaseToken returns the name of the Lease and this replica's token of term on it, or
// an error wrapping ErrStaleTerm when this replica no longer holds it in term.
type LeaseToken func(ctx context.Context, term uint64) (lease string, tok fence.Token, err error)

// WriteReport describes one write the publisher attempted.
type WriteReport struct {
	Term uint64
	// Published is what the object says after a successful write; zero
	// when Err is set. Published.Data is read-only: it is the stored
	// object's (see store.Object).
	Published Published
	Unchanged bool
	Conflicts int
	// Err is nil on success; it matches ErrStaleTerm when the write was
	// fenced off.
	Err error
}

// State is a snapshot of the publisher, for status pages, demos and
// metrics.
type State struct {
	// Running is true while Start runs; Term is the term of the current or
	// last run.
	Running bool
	Term    uint64
	// Held state of the current term.
	HasConfig      bool
	ConfigVersion  string
	HasPods        bool
	PodGeneration  uint64
	Invalid        bool // the newest configuration seen is the invalid one
	InvalidReasons []string
	// Fenced is true once a write of this term was refused by ErrStaleTerm;
	// the publisher writes nothing more in the term.
	Fenced bool
	// Last is what the last successful write of the current term recorded;
	// zero before one. Last.Data is read-only: it is the stored object's
	// (see store.Object).
	Last Published
	// Counters over the life of the component.
	Writes, Unchanged, Conflicts, StaleRefusals, Failures uint64
	// LastError is the last failed write's error message, "" if none.
	LastError string
}

// Component is the leader-only ConfigPublisher. Create one with New and
// register it with lifecycle.Manager.AddLeaderOnly.
type Component struct {
	bus      *busevents.EventBus
	store    store.Store
	identity string
	holds    HoldsLease
	token    LeaseToken
	content  Content
	retry    time.Duration
	onWrite  func(WriteReport)
	logger   *slog.Logger
	running  atomic.Bool
	// previous is the Payload the last Build returned (Inputs.Previous).
	// Only the Start in progress touches it (running orders the Starts).
	previous *Payload

	// mu guards state.
	mu    sync.Mutex
	state State
}

// New returns a publisher for bus writing to opts.Store.
func New(bus *busevents.EventBus, opts Options) (*Component, error) {
	if bus == nil {
		return nil, errors.New("configpublisher: bus is nil")
	}
	if opts.Store == nil {
		return nil, errors.New("configpublisher: options: store is nil")
	}
	if opts.RetryInterval < 0 {
		return nil, errors.New("configpublisher: options: retry interval is negative")
	}
	c := &Component{
		bus:      bus,
		store:    opts.Store,
		identity: opts.Identity,
		holds:    opts.HoldsLease,
		token:    opts.LeaseToken,
		content:  opts.Content,
		retry:    opts.RetryInterval,
		onWrite:  opts.OnWrite,
		logger:   opts.Logger,
	}
	if c.content == nil {
		c.content = RawContent{}
	}
	if c.retry == 0 {
		c.retry = DefaultRetryInterval
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.logger = c.logger.With("component", Name)
	return c, nil
}

// Name returns "config-publisher".
func (c *Component) Name() string { return Name }

// RequiredState reports the state a term needs before it is ready: a valid
// configuration and the discovered pods.
func (c *Component) RequiredState() []string {
	return []string{events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered}
}

// State returns a snapshot of the publisher.
func (c *Component) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	s.InvalidReasons = slices.Clone(s.InvalidReasons)
	return s
}

// term is one run's state; only Start's goroutine touches it.
type term struct {
	number uint64
	in     Inputs
	// invalid is the refusal in force: the newest ConfigInvalidEvent, unless
	// a valid configuration arrived after it; nil when none is.
	invalid *events.ConfigInvalidEvent
	fenced  bool
	last    Record // last record written or found unchanged, if wrote
	wrote   bool
	// lease and token are the term's Lease token (Options.LeaseToken), once read.
	lease string
	token fence.Token
}

// Start runs one term: it subscribes (leader-only) to configuration and pod
// state, signals lifecycle.Subscribed, and writes the published object each
// time what it would say changes, until ctx ends; then it returns nil. It
// returns ErrNoTerm if ctx carries no term and ErrAlreadyRunning if another
// Start runs.
func (c *Component) Start(ctx context.Context) error {
	number, ok := termctx.FromContext(ctx)
	if !ok {
		return ErrNoTerm
	}
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)

	// Per-term state starts afresh.
	t := &term{number: number}
	c.mu.Lock()
	c.state = State{
		Running: true, Term: number,
		Writes: c.state.Writes, Unchanged: c.state.Unchanged, Conflicts: c.state.Conflicts,
		StaleRefusals: c.state.StaleRefusals, Failures: c.state.Failures,
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.state.Running = false
		c.mu.Unlock()
	}()

	// Leader-only by registration: ctx comes from the Manager's term, and
	// the channel closes when the term ends.
	ch := busevents.Subscribe[busevents.Event](ctx, c.bus, Name, subscriptionBuffer, subscribeOpts...)
	lifecycle.Subscribed(ctx)

	var retry *time.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-ch:
			if !ok { // the term ended, or the bus stopped (the runtime ends the term)
				ch = nil
				continue
			}
			c.apply(ctx, t, e)
			// Take whatever else is queued before writing once.
			for drained := false; !drained; {
				select {
				case e, ok := <-ch:
					if !ok {
						ch = nil
						drained = true
						break
					}
					c.apply(ctx, t, e)
				default:
					drained = true
				}
			}
		case <-retryC:
			retryC = nil
		}
		if retryC != nil {
			continue // a retry is pending; it will write the newest state
		}
		if failed := c.publish(ctx, t); failed {
			if retry == nil {
				retry = time.NewTimer(c.retry)
			} else {
				retry.Reset(c.retry)
			}
			retryC = retry.C
		}
	}
}

// apply folds an event into the term's state.
func (c *Component) apply(ctx context.Context, t *term, e busevents.Event) {
	switch e := e.(type) {
	case *events.ConfigValidatedEvent:
		if t.in.Config == nil {
			lifecycle.HoldsState(ctx, e.EventType())
		}
		t.in.Config = e
		// A valid configuration ends an invalid status, unless it is older
		// than the invalid one (a replay racing a newer refusal).
		if t.invalid != nil && !e.Timestamp().Before(t.invalid.Timestamp()) {
			t.invalid = nil
		}
	case *events.HAProxyPodsDiscoveredEvent:
		if t.in.Pods == nil {
			lifecycle.HoldsState(ctx, e.EventType())
		}
		t.in.Pods = e
	case *events.TemplateRenderedEvent:
		if e.Term != t.number {
			return // a render of another term
		}
		t.in.Rendered, t.in.RenderFailed = e, nil
	case *events.ValidationFailedEvent:
		if e.Term != t.number {
			return
		}
		t.in.RenderFailed = e
	case *events.ConfigInvalidEvent:
		// A refusal older than the valid configuration held is history (a
		// replay racing a newer valid configuration).
		if t.in.Config == nil || !e.Timestamp().Before(t.in.Config.Timestamp()) {
			t.invalid = e
		}
	default:
		return
	}
	inv := t.invalid
	c.mu.Lock()
	s := &c.state
	if t.in.Config != nil {
		s.HasConfig, s.ConfigVersion = true, t.in.Config.Version
	}
	if t.in.Pods != nil {
		s.HasPods, s.PodGeneration = true, t.in.Pods.Generation
	}
	s.Invalid, s.InvalidReasons = inv != nil, reasons(inv)
	c.mu.Unlock()
}

func reasons(inv *events.ConfigInvalidEvent) []string {
	if inv == nil {
		return nil
	}
	out := make([]string, len(inv.Errors))
	for i, err := range inv.Errors {
		out[i] = err.Error()
	}
	return out
}

// desired returns the record the term's state calls for, and false when
// there is nothing to publish yet.
func (c *Component) desired(t *term) (Record, bool, error) {
	rec := Record{Term: t.number, Identity: c.identity, Status: StatusValid}
	in := t.in
	in.Previous = c.previous
	b, err := c.content.Build(in)
	if err != nil {
		return rec, false, err
	}
	if b.Payload != nil {
		c.previous = b.Payload
	}
	rec.Content = b.Payload
	if inv := t.invalid; inv != nil {
		rec.Reasons = reasons(inv)
		if len(rec.Reasons) == 0 {
			rec.Reasons = []string{"configuration refused without a reason"}
		}
		rec.InvalidVersion = inv.Version
	}
	if len(b.Reasons) > 0 {
		rec.Reasons = append(rec.Reasons, b.Reasons...)
		if rec.InvalidVersion == "" {
			rec.InvalidVersion = b.InvalidVersion
		}
	}
	if len(rec.Reasons) > 0 {
		rec.Status = StatusInvalid
		return rec, true, nil
	}
	return rec, rec.Content != nil, nil
}

// publish writes what the term's state calls for, if it changed, and
// reports whether the write failed in a way worth retrying.
func (c *Component) publish(ctx context.Context, t *term) (retry bool) {
	if t.fenced || ctx.Err() != nil {
		return false
	}
	rec, ok, err := c.desired(t)
	if err != nil {
		c.fail(err)
		return false // the same inputs would fail again; wait for new ones
	}
	if !ok || (t.wrote && sameRecord(t.last, rec)) {
		return false
	}
	if c.token != nil && t.lease == "" {
		lease, tok, err := c.token(ctx, t.number)
		switch {
		case errors.Is(err, ErrStaleTerm):
			c.fence(t, err)
			return false
		case err != nil:
			if ctx.Err() == nil {
				c.fail(fmt.Errorf("configpublisher: reading the Lease token of term %d: %w", t.number, err))
			}
			return ctx.Err() == nil
		}
		t.lease, t.token = lease, tok
	}
	rec.Lease, rec.Token = t.lease, t.token
	res, err := WriteHolding(ctx, c.store, rec, c.holds)
	if res.NoTermStamp != 0 && err == nil {
		c.logger.Warn("replaced a term stamp of no term of this Lease: this replica holds the Lease in its term, "+
			"which is below the stamp (an object restored from another cluster, or written by another program)",
			"object", c.store.String(), "stamp", res.NoTermStamp, "term", t.number)
	}
	c.mu.Lock()
	c.state.Conflicts += uint64(res.Conflicts)
	c.mu.Unlock()
	report := WriteReport{Term: t.number, Conflicts: res.Conflicts, Err: err}
	defer func() {
		if c.onWrite != nil && (err == nil || ctx.Err() == nil) {
			c.onWrite(report)
		}
	}()
	switch {
	case errors.Is(err, ErrStaleTerm):
		c.fence(t, err)
		return false
	case errors.Is(err, ErrStaleGeneration):
		c.mu.Lock()
		c.state.LastError = err.Error()
		c.mu.Unlock()
		c.logger.Warn("not publishing older pods than are published; waiting for newer ones", "term", t.number, "error", err)
		return false // the same inputs would be refused again
	case err != nil:
		if ctx.Err() != nil {
			return false // the term ended under the write
		}
		c.fail(err)
		return true
	}
	t.last, t.wrote = rec, true
	pub, _ := decodeOwned(res.Object) // read-only: pub.Data is the store's map (see store's Sharing)
	report.Published, report.Unchanged = pub, res.Unchanged
	c.mu.Lock()
	if res.Unchanged {
		c.state.Unchanged++
	} else {
		c.state.Writes++
	}
	c.state.Last = pub
	c.mu.Unlock()
	if c.logger.Enabled(ctx, slog.LevelInfo) { // the attributes cost allocations
		c.logger.Info("published configuration", "term", t.number, "object", c.store.String(),
			"config_version", pub.ConfigVersion, "pod_generation", pub.PodGeneration, "status", pub.Status,
			"reasons", pub.Reasons, "unchanged", res.Unchanged, "conflicts", res.Conflicts)
	}
	return false
}

// fence ends t's writes for a refusal of a stale term, err.
func (c *Component) fence(t *term, err error) {
	t.fenced = true
	c.mu.Lock()
	c.state.Fenced = true
	c.state.StaleRefusals++
	c.state.LastError = err.Error()
	c.mu.Unlock()
	c.logger.Warn("not publishing: the object was written by a newer term, or the Lease moved on", "term", t.number, "object", c.store.String(), "error", err)
}

func (c *Component) fail(err error) {
	c.mu.Lock()
	c.state.Failures++
	c.state.LastError = err.Error()
	c.mu.Unlock()
	c.logger.Error("publishing failed", "object", c.store.String(), "error", err)
}

func sameRecord(a, b Record) bool {
	if a.Status != b.Status || a.InvalidVersion != b.InvalidVersion || !slices.Equal(a.Reasons, b.Reasons) {
		return false
	}
	if (a.Content == nil) != (b.Content == nil) {
		return false
	}
	if a.Content == nil {
		return true
	}
	return a.Content.ConfigVersion == b.Content.ConfigVersion && a.Content.PodGeneration == b.Content.PodGeneration
}
