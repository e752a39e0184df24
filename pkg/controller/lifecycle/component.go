package lifecycle

import "context"

// Component is anything the Manager runs. Start blocks until ctx is done
// and then returns nil or ctx.Err() (possibly wrapped): that is a clean
// stop. Any other return, including any return while ctx is still live, and
// a panic, marks the component failed.
//
// A leader-only component's Start is called once per term, on the same
// instance, and again in the term after a failed run (RestartDelay later),
// and must therefore reset its per-term state at its top. Its
// context carries the term (termctx.FromContext) and
// busevents.WithLeaderOnly, so every subscription it makes with
// busevents.Subscribe[T](ctx, ...) is leader-only and ends with the term,
// with no option to remember. It subscribes so, then calls
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

// runKey is the context key of a run's token.
type runKey struct{}

// runToken identifies one run of one component; the Manager puts it in
// the context it hands to Start, so that Subscribed and HoldsState know
// whose signal they carry.
type runToken struct {
	m   *Manager
	u   *unit
	t   *termState // nil for an all-replica component
	mem *member    // nil for an all-replica component
	run uint64     // the member's run in its term (a restart is the next)
}

func tokenFrom(ctx context.Context) *runToken {
	if ctx == nil {
		return nil
	}
	tok, _ := ctx.Value(runKey{}).(*runToken)
	return tok
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
