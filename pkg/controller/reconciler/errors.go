package reconciler

import "errors"

// Errors of the package. Wrapped errors can be tested with errors.Is.
var (
	// ErrNilBus is returned by the constructors for a nil bus.
	ErrNilBus = errors.New("reconciler: bus is nil")
	// ErrBusStarted is returned by NewReconciler when the bus was already
	// started: its all-replica subscription must exist before bus.Start or
	// it could miss the first changes.
	ErrBusStarted = errors.New("reconciler: event bus already started; create the reconciler before bus.Start")
	// ErrInvalidOptions is wrapped by the constructors for options they
	// cannot use; the message names the field.
	ErrInvalidOptions = errors.New("reconciler: invalid options")
	// ErrAlreadyRunning is returned by Start while another Start of the same
	// instance is in progress, and by a second Reconciler.Start.
	ErrAlreadyRunning = errors.New("reconciler: already running")
	// ErrSubscriptionClosed is returned by Start when the bus closed the
	// component's subscription (the bus stopped) while its context was live.
	ErrSubscriptionClosed = errors.New("reconciler: subscription closed by the event bus")
	// ErrPipelinePanicked is returned by Coordinator.Start when a pipeline
	// step (renderer or validator) panicked; it also wraps
	// lifecycle.ErrPanicked, so the runtime counts it as a panic. The panic
	// is recovered on the run's goroutine and logged with its stack.
	ErrPipelinePanicked = errors.New("reconciler: pipeline step panicked")
)
