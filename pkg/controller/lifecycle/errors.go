package lifecycle

import (
	"errors"

	"github.com/baton-dev/baton/pkg/termrun"
)

// Errors returned by the Manager. Wrapped errors can be tested with errors.Is.
var (
	// ErrNilBus is returned by NewManager for a nil bus.
	ErrNilBus = errors.New("lifecycle: bus is nil")
	// ErrBusStarted is returned by NewManager when the bus was already
	// started: the manager's leadership subscription must exist before
	// bus.Start, or it could miss a BecameLeaderEvent.
	ErrBusStarted = errors.New("lifecycle: event bus already started; create the manager before bus.Start")
	// ErrInvalidOptions is wrapped by NewManager for options it cannot use;
	// the message names the field.
	ErrInvalidOptions = errors.New("lifecycle: invalid options")
	// ErrInvalidRegistration is wrapped by the Add methods for a nil
	// component, replayer or hook, an empty name or a duplicate name.
	ErrInvalidRegistration = errors.New("lifecycle: invalid registration")
	// ErrRunning is returned by the Add methods once Run was called, and by
	// a second call to Run.
	ErrRunning = errors.New("lifecycle: manager already running")
	// ErrBusStopped is returned by Run when the bus was stopped under it:
	// without leadership events the manager cannot tell whether it leads.
	ErrBusStopped = errors.New("lifecycle: event bus stopped")
	// ErrReturnedEarly is the failure recorded for a component whose Start
	// returned while its context was still live.
	ErrReturnedEarly = errors.New("lifecycle: component returned before its context ended")
	// ErrPanicked is the failure recorded for a component whose Start
	// panicked; the panic is recovered and logged with its stack. It is
	// termrun.ErrPanicked, which the runner of the leader-only components
	// wraps too.
	ErrPanicked = termrun.ErrPanicked
	// ErrMissingComponent is wrapped by the reason given to
	// Options.StepDown: the term misses a leader-only component.
	ErrMissingComponent = errors.New("lifecycle: leader-only component missing from the term")
	// ErrLeadershipLost is the cause (context.Cause) of a term context that
	// ended because this replica no longer leads in that term: a
	// LostLeadershipEvent for it, a newer term, or the end of its source
	// (Options.TermContext), whose own cause it wraps.
	ErrLeadershipLost = errors.New("lifecycle: leadership lost")
	// ErrSteppedDown is the cause of a term context that ended because the
	// Manager asked Options.StepDown to end the term; it wraps the reason
	// (ErrMissingComponent).
	ErrSteppedDown = errors.New("lifecycle: stepped down")
	// ErrManagerStopped is the cause of the term context, and of the
	// all-replica components' contexts, when Run's context ended (when the
	// bus stopped under Run, the cause is ErrBusStopped).
	ErrManagerStopped = errors.New("lifecycle: manager stopped")
	// ErrComponentFailed is wrapped by Status.Healthy for each component
	// that makes the replica unhealthy.
	ErrComponentFailed = errors.New("lifecycle: component failed")
)
