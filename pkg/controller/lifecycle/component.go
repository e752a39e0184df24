package lifecycle

import (
	"context"

	"github.com/baton-dev/baton/pkg/termctx"
)

// Component is anything the Manager runs. Start blocks until ctx is done
// and then returns nil or ctx.Err() (possibly wrapped): that is a clean
// stop. Any other return, including any return while ctx is still live, and
// a panic, marks the component failed.
//
// A leader-only component's Start is called once per term, on the same
// instance, and must therefore reset its per-term state at its top. Its
// context carries busevents.WithLeaderOnly, so every subscription it makes
// with busevents.Subscribe[T](ctx, ...) is leader-only and ends with the
// term, with no option to remember. It subscribes so, then calls
// Subscribed(ctx), and calls HoldsState(ctx, type) once it has processed
// state of each type it declared in RequiredState.
type Component interface {
	Name() string
	Start(ctx context.Context) error
}

// Replayer is the all-replica side's hand-over of state to a new leader;
// *leadership.StateReplayer[T] satisfies it. Replay re-publishes the cached
// state and reports whether there was any.
type Replayer interface {
	Replay() bool
}

// StateDependent is implemented by leader-only components that must hold
// replayed state before their term counts as ready. RequiredState lists event
// types (for example events.EventTypeConfigValidated); it is read once, when
// the component is added.
type StateDependent interface {
	RequiredState() []string
}

type ctxKey struct{}

// runToken identifies one run of one component; it is the value the
// Manager puts in the context it hands to Start.
type runToken struct {
	m   *Manager
	u   *unit
	t   *termState // nil for an all-replica component
	mem *member    // nil for an all-replica component
}

func tokenFrom(ctx context.Context) *runToken {
	if ctx == nil {
		return nil
	}
	tok, _ := ctx.Value(ctxKey{}).(*runToken)
	return tok
}

// runCtx is the context handed to one run: its parent, with the run's token
// as the value of ctxKey and, for a leader-only run, the run's term (for
// termctx.FromContext: the termState is the termctx.Carrier, so a term
// needs no context to stamp it). A leader-only run's runCtx lives inside
// its member, so a term allocates no context per component.
type runCtx struct {
	context.Context
	tok runToken
}

func (c *runCtx) Value(key any) any {
	switch {
	case key == (ctxKey{}):
		return &c.tok
	case c.tok.t != nil && termctx.IsKey(key):
		return c.tok.t // the run's term, as a termctx.Carrier
	}
	return c.Context.Value(key)
}

// TermFromContext returns the term of the leader-only run whose context ctx
// is (or derives from). It reports false for an all-replica component's
// context and for any context no term was stamped on. It is
// termctx.FromContext, the one term accessor of the core: the same lookup
// answers for a context of the elector's (pkg/k8s/leaderelection).
func TermFromContext(ctx context.Context) (term uint64, ok bool) {
	return termctx.FromContext(ctx)
}

// Subscribed tells the Manager that the leader-only component running under
// ctx has made its leader-only subscriptions, so the term's replays may be
// published. Call it right after subscribing, at the top of Start; a
// component that subscribes to nothing calls it at once. The Manager runs the
// term hooks (the replays) only when every leader-only component of the term
// signalled it, or SubscribeTimeout passed; a component that signals later
// gets the replays published once more. Calls after the first, calls from a
// term that has ended and calls with any other context do nothing. It never
// blocks.
func Subscribed(ctx context.Context) {
	if tok := tokenFrom(ctx); tok != nil && tok.t != nil {
		tok.m.subscribed(tok)
	}
}

// HoldsState tells the Manager that the leader-only component running under
// ctx now holds state of eventType: it processed a replayed or newly
// published event of that type. The term is ready once every StateDependent
// component reported each type of its RequiredState, after the term hooks
// ran. Calls for types not required, from a term that has ended or with any
// other context do nothing. It never blocks.
func HoldsState(ctx context.Context, eventType string) {
	if tok := tokenFrom(ctx); tok != nil && tok.t != nil {
		tok.m.holds(tok, eventType)
	}
}
