package demo

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Fault is a way of failing the leader.
type Fault string

// Faults.
const (
	// FaultKill crashes the leader while its kubelet stays silent (as when
	// its node is cut off): the lease must be waited out.
	FaultKill Fault = "kill"
	// FaultCrash crashes the leader the same way, and then its kubelet
	// reports its container terminated: a follower takes the lease at once.
	FaultCrash   Fault = "crash"
	FaultPause   Fault = "pause"
	FaultRelease Fault = "release"
	// FaultHang makes a leader-only component of the leader hang at the end
	// of its term; the replica, leading again without it, must resign.
	FaultHang Fault = "hang"
)

// Schedule returns the faults of n failovers drawn from seed: cycles of the
// five faults, each in a shuffled order, never the same fault twice in a
// row.
func Schedule(seed uint64, n int) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []Fault
	for len(out) < n {
		cycle := []Fault{FaultKill, FaultCrash, FaultPause, FaultRelease, FaultHang}
		rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		if len(out) > 0 && cycle[0] == out[len(out)-1] {
			cycle[0], cycle[len(cycle)-1] = cycle[len(cycle)-1], cycle[0]
		}
		out = append(out, cycle...)
	}
	return out[:n]
}

// Limits of Options, checked by Run.
const (
	MinReplicas = 2
	MaxReplicas = 32
	// MaxLeaseDuration is the longest lease the demo accepts: a kill or a
	// pause waits the lease out, so a longer one makes each failover last
	// minutes.
	MaxLeaseDuration = time.Minute
)

// Defaults, the values of DefaultOptions.
const (
	DefaultReplicas        = 3
	DefaultFailovers       = 6
	DefaultLeaseDuration   = time.Second
	DefaultRenewDeadline   = 700 * time.Millisecond
	DefaultRetryPeriod     = 200 * time.Millisecond
	DefaultDwell           = 2500 * time.Millisecond
	DefaultRefreshInterval = 100 * time.Millisecond
)

// ErrInvalidOptions is wrapped by every *OptionError.
var ErrInvalidOptions = errors.New("demo: invalid options")

// OptionError is an option Run cannot use. Run returns them joined
// (errors.Join), one per problem; each wraps ErrInvalidOptions.
type OptionError struct {
	// Field is the Options field, for example "LeaseDuration", and Value
	// its value.
	Field string
	Value any
	// Problem says what is wrong, for example "must be at least 2".
	Problem string
	// Other names the field Field was compared with, "" if none, and
	// OtherValue its value.
	Other      string
	OtherValue any
	// Election, when set, is the election's own error about one of its
	// durations (LeaseDuration, RenewDeadline, RetryPeriod: Options names
	// them as the election's Config does). Problem is then its reason,
	// which states the value (for a lease above the election's maximum,
	// the demo's own, lower, maximum instead); Value and Other are unset.
	Election *k8sle.ConfigError
}

func (e *OptionError) Error() string {
	return "demo: " + e.Describe(func(field string) string { return field })
}

// Describe says what is wrong with the options named by name, which maps a
// field to what the user knows it as (a command maps it to its flag).
func (e *OptionError) Describe(name func(field string) string) string {
	if e.Election != nil {
		return name(e.Field) + ": " + e.Problem
	}
	s := fmt.Sprintf("%s %v %s", name(e.Field), e.Value, e.Problem)
	if e.Other != "" {
		s += fmt.Sprintf(" %s %v", name(e.Other), e.OtherValue)
	}
	return s
}

// Unwrap returns ErrInvalidOptions, and the election's error if there is one.
func (e *OptionError) Unwrap() []error {
	if e.Election != nil {
		return []error{ErrInvalidOptions, e.Election}
	}
	return []error{ErrInvalidOptions}
}

// Options configure Run. Start from DefaultOptions: Run takes every value
// as given and refuses those out of range (see check); the zero value of a
// field is not a default, except where a field says so.
type Options struct {
	// Replicas is the number of replicas, MinReplicas to MaxReplicas.
	Replicas int
	// Failovers is the number of leader failures, 0 or more; 0 starts the
	// replicas, elects a leader and stops.
	Failovers int
	// LeaseDuration, RenewDeadline and RetryPeriod are the election's
	// timings: LeaseDuration whole seconds, from 1s to MaxLeaseDuration and
	// above RenewDeadline; RenewDeadline above 1.2 × RetryPeriod;
	// RetryPeriod at least k8sle.MinRetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Dwell is how long a leader leads between failovers, 0 or more.
	Dwell time.Duration
	// Seed draws the order of the faults and the changes made to the
	// configuration and the pods.
	Seed uint64
	// Out receives the live view or the log lines, and the per-failover
	// lines; nil discards them.
	Out io.Writer
	// Live redraws Out in place with ANSI escapes (for a terminal) instead
	// of printing log lines.
	Live bool
	// RefreshInterval is the live view's redraw interval, positive.
	RefreshInterval time.Duration
	// StepTimeout bounds each wait of the run (for a leader, for a sync);
	// 0 means 10 lease durations, at least 5s.
	StepTimeout time.Duration
	// Logger receives the replicas' own log lines; nil discards them.
	Logger *slog.Logger
	// Metrics, if set, gets each replica's /metrics, /healthz and /readyz
	// handler under its name as the replica starts.
	Metrics *Mux
}

// DefaultOptions returns the options of a default run: the Default...
// constants, seed 1, no output.
func DefaultOptions() Options {
	return Options{
		Replicas: DefaultReplicas, Failovers: DefaultFailovers,
		LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod,
		Dwell: DefaultDwell, Seed: 1, RefreshInterval: DefaultRefreshInterval,
	}
}

// Check returns nil if Run can use o, else one *OptionError per problem,
// joined. Run calls it before it starts anything.
func (o Options) Check() error {
	var errs []error
	bad := func(field string, value any, problem string) {
		errs = append(errs, &OptionError{Field: field, Value: value, Problem: problem})
	}
	if o.Replicas < MinReplicas || o.Replicas > MaxReplicas {
		bad("Replicas", o.Replicas, fmt.Sprintf("is out of range: want %d to %d (a failover needs a second replica)", MinReplicas, MaxReplicas))
	}
	if o.Failovers < 0 {
		bad("Failovers", o.Failovers, "is negative")
	}
	if o.RefreshInterval <= 0 {
		bad("RefreshInterval", o.RefreshInterval, "must be positive")
	}
	leaseNamed := false
	if err := k8sle.CheckDurations(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod); err != nil {
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() { // errors.Join's
			var ce *k8sle.ConfigError
			if !errors.As(e, &ce) {
				errs = append(errs, e)
				continue
			}
			problem := ce.Reason
			if ce.Field == "LeaseDuration" && o.LeaseDuration > k8sle.MaxLeaseDuration {
				// The election's limit (1h) is not the one that binds here:
				// name the demo's.
				problem = fmt.Sprintf("lease duration %v is above %v, the demo's maximum: each kill or pause waits the lease out", o.LeaseDuration, MaxLeaseDuration)
			}
			errs = append(errs, &OptionError{Field: ce.Field, Problem: problem, Election: ce})
			leaseNamed = leaseNamed || ce.Field == "LeaseDuration"
		}
	}
	if o.LeaseDuration > MaxLeaseDuration && !leaseNamed {
		bad("LeaseDuration", o.LeaseDuration, fmt.Sprintf("is above %v: each kill or pause waits the lease out", MaxLeaseDuration))
	}
	if o.Dwell < 0 {
		bad("Dwell", o.Dwell, "is negative")
	}
	if o.StepTimeout < 0 {
		bad("StepTimeout", o.StepTimeout, "is negative")
	}
	return errors.Join(errs...)
}

// withDefaults checks o and fills in what a nil or zero means.
func (o Options) withDefaults() (Options, error) {
	if err := o.Check(); err != nil {
		return o, err
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = max(10*o.LeaseDuration, 5*time.Second)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Estimate returns about how long Run takes with o when every step goes as
// planned: the first election, then for each failover the dwell and the
// wait for a new leader, which a kill or a pause makes last until the
// lease expired (a pause also until the paused replica resumes); after a
// crash the kubelet's report ends the wait at once.
func (o Options) Estimate() time.Duration {
	d := o.RetryPeriod
	for _, f := range Schedule(o.Seed, o.Failovers) {
		d += max(o.Dwell, 0)
		switch f {
		case FaultKill:
			d += o.LeaseDuration + o.RetryPeriod
		case FaultPause:
			d += o.LeaseDuration + o.RenewDeadline
		case FaultRelease, FaultCrash:
			d += o.RetryPeriod
		case FaultHang:
			d += 2*o.LeaseDuration + o.RenewDeadline + o.stepDownGrace()
		}
	}
	return d
}

// TermExplained says what a term's number is, for a reader of the output.
const TermExplained = "a term is numbered by the lease's resourceVersion at its acquisition: every write to the lease (each renew) raises it, so terms grow in jumps (1, 15, 33, ...), each above the last, and a write carrying an older term is refused"

func joinFaults(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// stepDownGrace is the replicas' step-down grace (app.Options.StepDownGrace):
// a lease duration, so that the hang fault's hand-over lasts about as long
// as a kill's.
func (o Options) stepDownGrace() time.Duration { return o.LeaseDuration }
