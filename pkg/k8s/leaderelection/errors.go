package leaderelection

import "errors"

// Sentinel errors. Errors returned by this package wrap them, so test with errors.Is.
var (
	// ErrInvalidConfig is wrapped by every configuration error of New, NewWithStore and
	// NewKubernetesStore; errors.As with *ConfigError gives the offending field.
	ErrInvalidConfig = errors.New("leaderelection: invalid config")
	// ErrAlreadyStarted is returned by a second call of Elector.Start.
	ErrAlreadyStarted = errors.New("leaderelection: elector already started")
	// ErrLeaseNotFound is returned by a LeaseStore when the lease does not exist.
	ErrLeaseNotFound = errors.New("leaderelection: lease not found")
	// ErrConflict is returned by a LeaseStore when a Create finds the lease present or an
	// Update carries a resourceVersion that is not the current one.
	ErrConflict = errors.New("leaderelection: lease changed concurrently")
	// ErrRenewDeadlineMissed is the cause of a term that ended because the leader could
	// not renew within RenewDeadline, and what Elector.Healthy reports while a replica
	// still believes it holds a lease it has not renewed in time.
	ErrRenewDeadlineMissed = errors.New("leaderelection: renew deadline missed")
	// ErrLeaseLost is the cause of a term that ended because the lease was taken,
	// overwritten or deleted by someone else.
	ErrLeaseLost = errors.New("leaderelection: lease lost")
	// ErrHandedOver is the cause of a term that ended to hand the lease over: through
	// Elector.HandOver, or because the lease's preferredHolder names another candidate.
	ErrHandedOver = errors.New("leaderelection: lease handed over")
	// ErrNotLeader is returned by Elector.HandOver when the elector does not lead: not
	// started, stopped, or following.
	ErrNotLeader = errors.New("leaderelection: not leading")
	// ErrInvalidHandOver is returned by Elector.HandOver for an empty identity or the
	// elector's own.
	ErrInvalidHandOver = errors.New("leaderelection: invalid hand-over target")
	// ErrHistoryRestored is the watch error of a MemoryStore restored by hand
	// (leaderelectiontest.Restore).
	ErrHistoryRestored = errors.New("leaderelection: store history restored")
	// ErrResigned is the cause of a term ended by Elector.Resign.
	ErrResigned = errors.New("leaderelection: resigned")
	// ErrInvalidTerm is logged when a store returns a resourceVersion that is not a
	// decimal number above every term this elector held before; the elector then
	// releases the lease instead of leading under it.
	ErrInvalidTerm = errors.New("leaderelection: resource version is not a valid term")
)

// ConfigError reports one invalid configuration field. It wraps ErrInvalidConfig.
type ConfigError struct {
	// Field is the name of the offending Config field or constructor argument,
	// e.g. "LeaseName" or "clientset".
	Field string
	// Reason is the lowercase description, e.g. "lease name is empty".
	Reason string
}

// Error returns "leaderelection: " followed by the reason.
func (e *ConfigError) Error() string { return "leaderelection: " + e.Reason }

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// ConfigErrors returns the parts of err, a configuration error of this package (one
// *ConfigError per problem): the errors it joins (errors.Join), or err alone.
func ConfigErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
