package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Defaults for the zero durations of Config; the same as client-go's conventional values.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// retryJitterFactor is the largest random stretch of a retry delay, as a fraction of it.
// RenewDeadline must stay above (1+retryJitterFactor)*RetryPeriod so that a leader whose
// renew failed gets at least one retry before its term ends.
const retryJitterFactor = 0.2

// Config configures an Elector. Zero durations take the defaults written on each field.
type Config struct {
	// Enabled false runs no election: no lease is read or written, and the process leads
	// alone from Start (term 1) until the context given to Start ends. Use it for single
	// replica runs. Identity is still required; the lease fields, the clientset and the
	// store are then not checked and may be empty or nil.
	Enabled bool
	// Identity names this candidate in the lease's holderIdentity. Required; it must be
	// unique among the candidates (a pod name is the usual choice). Two candidates with
	// the same identity defeat mutual exclusion.
	Identity string
	// LeaseName is the name of the coordination.k8s.io/v1 Lease. Required.
	LeaseName string
	// LeaseNamespace is the namespace of the Lease. Required (the in-memory store ignores
	// it, but it must still be set).
	LeaseNamespace string
	// LeaseDuration is how long followers wait, by their own clock from when they last saw
	// the lease change, before they take a lease that was not renewed. Default 15s. Written
	// to the Lease as leaseDurationSeconds, rounded up to whole seconds. Must be greater
	// than RenewDeadline; the difference is the margin for clock rate skew and for a
	// leader that is slow to notice its term ended.
	LeaseDuration time.Duration
	// RenewDeadline is how long after its last successful renew a leader keeps believing
	// it leads. Default 10s. When it passes, the term ends: its context is cancelled and
	// IsLeader reports false, by the leader's own monotonic clock. Must be greater than
	// 1.2 × RetryPeriod.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between a leader's renews, and the cap of the backoff
	// between failed attempts to acquire, renew or re-watch. Default 2s.
	RetryPeriod time.Duration
	// ReleaseOnCancel makes Start release the lease when its context ends, after the
	// leader's OnStartedLeading returned: the holder is cleared with a compare-and-swap,
	// so a follower takes over at once instead of after LeaseDuration. Only set it when
	// leader work stops with the term context.
	ReleaseOnCancel bool
}

// Callbacks are called by a started Elector. All are optional.
type Callbacks struct {
	// OnStartedLeading runs in its own goroutine when a term starts. ctx is the term
	// context: it ends with the term, and TermFromContext(ctx) gives the term. The Elector
	// waits for it to return before it campaigns for a next term, before it releases the
	// lease, and before Start returns.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs exactly once for every term that started, after the term
	// context was cancelled, on the election goroutine (the election waits for it; it may
	// run while OnStartedLeading still runs).
	OnStoppedLeading func()
	// OnNewLeader is called, in order, from a goroutine of its own, for each observed
	// change of the lease's holder (including to this candidate). "" is never reported.
	OnNewLeader func(identity string)
}

// withDefaults returns c with the zero durations replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	return c
}

// validate checks a config with defaults applied. missing names a nil lease source
// (clientset or store), "" when present. It returns all problems joined.
func (c Config) validate(missing string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Identity == "" {
		bad("Identity", "identity is empty")
	}
	if c.Enabled {
		if c.LeaseName == "" {
			bad("LeaseName", "lease name is empty")
		}
		if c.LeaseNamespace == "" {
			bad("LeaseNamespace", "lease namespace is empty")
		}
		if missing != "" {
			bad(missing, "%s is nil", missing)
		}
	}
	durations := true
	for _, d := range []struct {
		field, name string
		value       time.Duration
	}{
		{"LeaseDuration", "lease duration", c.LeaseDuration},
		{"RenewDeadline", "renew deadline", c.RenewDeadline},
		{"RetryPeriod", "retry period", c.RetryPeriod},
	} {
		if d.value < 0 {
			bad(d.field, "%s is negative: %v", d.name, d.value)
			durations = false
		}
	}
	if durations {
		if c.LeaseDuration <= c.RenewDeadline {
			bad("LeaseDuration", "lease duration %v must be greater than renew deadline %v",
				c.LeaseDuration, c.RenewDeadline)
		}
		if limit := time.Duration((1 + retryJitterFactor) * float64(c.RetryPeriod)); c.RenewDeadline <= limit {
			bad("RenewDeadline", "renew deadline %v must be greater than 1.2 × retry period %v (%v)",
				c.RenewDeadline, c.RetryPeriod, limit)
		}
	}
	return errors.Join(errs...)
}
