package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
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

// Bounds of the durations of Config. LeaseDuration is stored in the Lease in whole
// seconds (leaseDurationSeconds, an int32), so it must be whole seconds and is capped
// well below the int32 range; RetryPeriod has a floor so that no loop spins.
const (
	MinLeaseDuration = time.Second
	MaxLeaseDuration = time.Hour
	MinRetryPeriod   = 100 * time.Millisecond
)

// Config configures an Elector. Zero durations take the defaults written on each field.
// The zero Config (with Identity, the lease fields and a store) runs an election: the
// mode without one must be asked for with SingleReplica.
type Config struct {
	// SingleReplica runs no election: no lease is read or written, and the process leads
	// alone from Start (term 1) until the context given to Start ends. Use it only when a
	// single replica runs. Identity is still required; the lease fields, the durations,
	// ReleaseOnCancel, the clientset and the store must then be left empty, and each one
	// set is reported as an error, so that a half-configured election is never silently
	// turned off.
	SingleReplica bool
	// Identity names this candidate in the lease's holderIdentity. Required; it must be
	// unique among the candidates (a pod name is the usual choice). Two candidates with
	// the same identity defeat mutual exclusion; an elector that sees the lease written
	// in its name by another logs it at ERROR and counts it (Stats.DuplicateIdentity).
	Identity string
	// LeaseName is the name of the coordination.k8s.io/v1 Lease. Required.
	LeaseName string
	// LeaseNamespace is the namespace of the Lease. Required (the in-memory store ignores
	// it, but it must still be set).
	LeaseNamespace string
	// LeaseDuration is how long followers wait, by their own clock from when they last saw
	// the lease change, before they take a lease that was not renewed. Default 15s. Written
	// to the Lease as leaseDurationSeconds, so it must be whole seconds, from
	// MinLeaseDuration (1s) to MaxLeaseDuration (1h). Must be greater than RenewDeadline;
	// the difference is the margin for clock rate skew and for a leader that is slow to
	// notice its term ended.
	LeaseDuration time.Duration
	// RenewDeadline is how long after its last successful renew a leader keeps believing
	// it leads. Default 10s. When it passes, the term ends: its context is cancelled and
	// IsLeader reports false, by the leader's own monotonic clock. Must be greater than
	// 1.2 × RetryPeriod.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between a leader's renews, and the cap of the backoff
	// between failed attempts to acquire, renew or re-watch. Default 2s; at least
	// MinRetryPeriod (100ms).
	RetryPeriod time.Duration
	// ReleaseOnCancel makes Start release the lease when its context ends, after the
	// leader's OnStartedLeading returned: the holder is cleared with a compare-and-swap,
	// so a follower takes over at once instead of after LeaseDuration. Only set it when
	// leader work stops with the term context.
	ReleaseOnCancel bool
	// Clock is the time source of every time read and timer of the elector; nil (the
	// usual choice) is the real clock. It exists for tests and fault injection, e.g. a
	// clock that runs at another rate than the others'. Safety needs clocks that agree
	// on the rate, not on the time: see Config.ClockTolerance.
	Clock Clock
	// JitterSource is the random source of the retry jitter (the backoff of acquires,
	// renews and re-watches); nil (the usual choice) is math/rand/v2's global source.
	// Set a seeded source to make an elector's choices replay exactly, e.g. in a fault
	// test on Clock that replays a failing seed. The elector reads it from its election
	// goroutine only, so it need not be safe for concurrent use, but each elector needs
	// its own.
	JitterSource rand.Source
	// Incarnation names this process's run (for a pod, pkg/k8s/incarnation's
	// Incarnation.String); "" records none. Every acquire and renew writes it to the
	// lease (LeaseRecord.Incarnation), so followers with a DeathWatch can take the lease
	// at once when it is proven over. Set it only to a value no other run of any
	// process will ever use, at most 1024 bytes.
	Incarnation string
	// DeathWatch, when set, lets this candidate take the lease at once, by a
	// compare-and-swap on the state it saw, from a Baton holder whose recorded
	// incarnation it proves over, instead of waiting the lease out. nil (the
	// default, and the way to turn the death signal off) waits as usual.
	DeathWatch DeathWatch
	// FollowOnly starts the elector following: it watches the lease, tracks its holder
	// and everything the acquisition rules need (with DeathWatch, the holder's death
	// too), but makes no acquiring write, except to take a lease handed over to it
	// (a release naming it preferredHolder), until SetCampaigning(true). It exists for
	// electors whose right to campaign comes from elsewhere, e.g. the shard electors
	// of package sharding, which campaign only for the shards placed on their replica.
	FollowOnly bool
	// Liveness, when set, keeps the liveness of the lease's holders outside the lease
	// (see Liveness): a leader never renews the lease (it is written only when it
	// changes hands), its term lasts RenewDeadline after the send of its acquiring
	// write or of the last renew of its liveness record it was told of
	// (Elector.LivenessRenewed), and a follower takes a Baton holder's lease a
	// leaseDuration after both the lease and the holder's liveness record last
	// changed, once Liveness.Confirm found the record quiet. A term that missed its
	// deadline is released as after Resign. Incarnation is then required. Only for
	// leases no client-go elector shares (they judge a holder by its renews):
	// package sharding sets it for shard Leases. nil (the default) renews the lease.
	Liveness Liveness
}

// Callbacks are called by a started Elector. All are optional.
type Callbacks struct {
	// OnStartedLeading runs in a goroutine of its own when a term starts (the calls of
	// successive terms never overlap). ctx is the term context: it ends with the term,
	// and termctx.FromContext(ctx) gives the term. The Elector waits for it to return before it campaigns for a next
	// term, before it releases the lease, and before Start returns.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs exactly once for every term that started, after the term
	// context was cancelled, on the election goroutine (the election waits for it; it may
	// run while OnStartedLeading still runs).
	OnStoppedLeading func()
	// OnNewLeader is called, in order, from a goroutine of its own, for each observed
	// change of the lease's holder (including to this candidate). "" is never reported.
	OnNewLeader func(identity string)
	// OnHolderDead is called, on the election goroutine, when Config.DeathWatch proved
	// the incarnation of the lease's holder over, with that holder's identity (once
	// per proven incarnation), before this elector takes the lease. It must return
	// soon: the election waits for it.
	OnHolderDead func(identity string)
}

// ClockTolerance is the clock rate tolerance of c (zero durations taking their
// defaults): the largest ε such that no two candidates lead at once while every
// candidate's clock (Config.Clock, the real clock by default) runs at a rate within
// [1−ε, 1+ε] of the true rate, (LeaseDuration − RenewDeadline) / (LeaseDuration +
// RenewDeadline); 0.2 with the defaults 15s/10s. It is the symmetric form of the bound
// on two clocks: a follower's clock may run at most LeaseDuration/RenewDeadline times as
// fast as the leader's. The bound is on rates, not readings: clocks need not agree on
// the time. See docs/design/leaderelection.md, # Clocks.
func (c Config) ClockTolerance() float64 {
	c = c.withDefaults()
	ld, rd := float64(c.LeaseDuration), float64(c.RenewDeadline)
	if ld <= rd || rd <= 0 {
		return 0 // an invalid config (New refuses it) tolerates nothing
	}
	return (ld - rd) / (ld + rd)
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

// validate checks a config as given (before defaults). source names the lease source
// argument ("clientset" or "store") and present tells whether it is non-nil. It returns
// all problems joined, each a *ConfigError naming its field.
func (c Config) validate(source string, present bool) error {
	var errs configErrors
	bad := errs.add
	if c.Identity == "" {
		bad("Identity", "identity is empty")
	}
	if c.SingleReplica {
		c.validateSingle(source, present, bad)
		return errors.Join(errs...)
	}
	if c.LeaseName == "" {
		bad("LeaseName", "lease name is empty")
	}
	if c.LeaseNamespace == "" {
		bad("LeaseNamespace", "lease namespace is empty")
	}
	if !present {
		bad(source, "%s is nil", source)
	}
	d := c.withDefaults()
	checkDurations(d.LeaseDuration, d.RenewDeadline, d.RetryPeriod, bad)
	checkDeathSignal(c, bad)
	checkLiveness(c, bad)
	return errors.Join(errs...)
}

// configErrors collects the *ConfigError values of a check.
type configErrors []error

// add appends a *ConfigError for field; it is the bad callback of the checks.
func (e *configErrors) add(field, format string, args ...any) {
	*e = append(*e, &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// validateSingle reports every election field set although SingleReplica runs none.
// c is the config before defaults.
func (c Config) validateSingle(source string, present bool, bad func(field, format string, args ...any)) {
	set := func(field string, isSet bool) {
		if isSet {
			bad(field, "%s is set, but SingleReplica runs no election", strings.ToLower(field[:1])+field[1:])
		}
	}
	set("LeaseName", c.LeaseName != "")
	set("LeaseNamespace", c.LeaseNamespace != "")
	set("LeaseDuration", c.LeaseDuration != 0)
	set("RenewDeadline", c.RenewDeadline != 0)
	set("RetryPeriod", c.RetryPeriod != 0)
	set("ReleaseOnCancel", c.ReleaseOnCancel)
	set("Incarnation", c.Incarnation != "")
	set("DeathWatch", c.DeathWatch != nil)
	set("FollowOnly", c.FollowOnly)
	set("Liveness", c.Liveness != nil)
	set(source, present)
}

// CheckDurations checks an election's durations as New and NewWithStore do once the
// defaults replaced zero durations: here a zero or negative duration is an error, not a
// default. It returns nil, or one *ConfigError per problem, joined (errors.Join); each
// Field is "LeaseDuration", "RenewDeadline" or "RetryPeriod", so that a caller taking the
// durations under other names (flags, options) can map the field to its own name.
func CheckDurations(leaseDuration, renewDeadline, retryPeriod time.Duration) error {
	var errs configErrors
	checkDurations(leaseDuration, renewDeadline, retryPeriod, errs.add)
	return errors.Join(errs...)
}

// checkDurations reports each problem of the durations to bad (see CheckDurations).
func checkDurations(leaseDuration, renewDeadline, retryPeriod time.Duration, bad func(field, format string, args ...any)) {
	c := Config{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod}
	ok := true
	switch ld := c.LeaseDuration; {
	case ld < MinLeaseDuration:
		bad("LeaseDuration", "lease duration %v is below the minimum %v", ld, MinLeaseDuration)
		ok = false
	case ld > MaxLeaseDuration:
		bad("LeaseDuration", "lease duration %v is above the maximum %v", ld, MaxLeaseDuration)
		ok = false
	case ld%time.Second != 0:
		bad("LeaseDuration", "lease duration %v is not whole seconds (the lease stores seconds)", ld)
		ok = false
	}
	if c.RetryPeriod < MinRetryPeriod {
		bad("RetryPeriod", "retry period %v is below the minimum %v", c.RetryPeriod, MinRetryPeriod)
		ok = false
	}
	if c.RenewDeadline <= 0 {
		bad("RenewDeadline", "renew deadline %v is not positive", c.RenewDeadline)
		ok = false
	}
	if !ok {
		return
	}
	if c.LeaseDuration <= c.RenewDeadline {
		bad("LeaseDuration", "lease duration %v must be greater than renew deadline %v",
			c.LeaseDuration, c.RenewDeadline)
	}
	if limit := time.Duration((1 + retryJitterFactor) * float64(c.RetryPeriod)); c.RenewDeadline <= limit {
		bad("RenewDeadline", "renew deadline %v must be greater than 1.2 × retry period %v (%v)",
			c.RenewDeadline, c.RetryPeriod, limit)
	}
}
