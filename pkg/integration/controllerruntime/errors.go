package controllerruntime

import (
	"errors"

	"github.com/baton-dev/baton/pkg/fence"
)

// Sentinel errors. Errors returned by this package wrap them, so test with errors.Is.
var (
	// ErrInvalidOptions is wrapped by New for options it cannot use; the message names
	// the field and what to set it to.
	ErrInvalidOptions = errors.New("controllerruntime: invalid options")
	// ErrInvalidRegistration is wrapped by the Add methods for a nil function or
	// reconciler, an empty or duplicate name, a watch without an object, or
	// leader-only work on a Runtime without Options.LeaderElectionID.
	ErrInvalidRegistration = errors.New("controllerruntime: invalid registration")
	// ErrLeaderOnlyRunnable is returned by Runtime.Manager's Add for a runnable the
	// manager would run as leader-only work (a controller of controller-runtime's own
	// builder, a manager.RunnableFunc): without the manager's election it would run on
	// every replica, unfenced. The message says what to register it with instead.
	ErrLeaderOnlyRunnable = errors.New("controllerruntime: leader-only runnable added to the manager")
	// ErrControllerLeftOnManager is returned by Runtime.Start, stopping the manager,
	// when a controller Baton did not start runs on this replica: one built with
	// controller-runtime's builder on the manager New was given instead of on
	// Runtime.Manager, which would run on every replica, unfenced (strays.go). The
	// message names the controllers and what to change.
	ErrControllerLeftOnManager = errors.New("controllerruntime: controller left on the manager")
	// ErrUnsupportedControllerRuntime is returned by New when the controller-runtime
	// the program is built with lacks what the Runtime relies on beyond its public API
	// (coupling.go); the message names the version.
	ErrUnsupportedControllerRuntime = errors.New("controllerruntime: unsupported controller-runtime")
	// ErrStarted is returned by the Add methods once the Runtime was started, and by a
	// second Start.
	ErrStarted = errors.New("controllerruntime: runtime already started")
	// ErrNoTerm is returned by a fenced client's writes under a context that belongs to
	// no leader term. Only the Runtime's leader-only work has one: a controller
	// built with NewControllerManagedBy or Runtime.AddController (one built with ctrl.NewControllerManagedBy
	// runs on every replica, outside any term) or a function added with AddLeaderOnly,
	// writing with the context it was given or one derived from it.
	ErrNoTerm = errors.New("controllerruntime: write outside a leader term " +
		"(build the controller with controllerruntime.NewControllerManagedBy(rt.Manager()), not ctrl.NewControllerManagedBy, " +
		"and write with the context Reconcile was given)")
	// ErrTermEnded is returned by a fenced client's writes once the term of the context
	// has ended, by the elector's own clock: another replica may lead now.
	ErrTermEnded = errors.New("controllerruntime: term ended")
	// ErrStaleTerm is returned by a fenced client's writes to an object stamped with a
	// newer term than the writer's: a newer leader wrote it. It is pkg/fence's, the
	// one every writer of Baton returns.
	ErrStaleTerm = fence.ErrStaleTerm
	// ErrUnstampablePatch is returned by a fenced client's Patch of a body it cannot
	// add its stamps to (a CBOR apply patch, a body that is not JSON, or a JSON patch
	// that moves or copies onto metadata.annotations, whose result it cannot tell).
	ErrUnstampablePatch = errors.New("controllerruntime: the fenced client cannot stamp this patch")
	// ErrNoResourceVersion is returned by a fenced client's Update of an object without a
	// resourceVersion: a fenced update is a compare-and-swap, so update the object as it
	// was read (Get it first).
	ErrNoResourceVersion = errors.New("controllerruntime: fenced update needs the resourceVersion the object was read at")
)
