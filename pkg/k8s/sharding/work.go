package sharding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
	"github.com/baton-dev/baton/pkg/termrun"
)

// DefaultRestartDelay is the default of WorkConfig.RestartDelay.
const DefaultRestartDelay = termrun.DefaultRestartDelay

// OverstayWarning is the default of WorkConfig.OverstayAfter: how long after its
// term ended a Work that has not returned is reported, once per run, as holding its
// shard back from being handed over.
const OverstayWarning = termrun.DefaultOverstayAfter

// Work is leader-only work of a shard: it runs once for each term of each shard this
// replica leads, and stops when that term ends.
type Work struct {
	// Name names the work in logs. Required, unique among the works of a Workers.
	Name string
	// Run does the work of one shard term. ctx is the run's context, derived from
	// the shard's term context (termctx.Get(ctx) gives t too, with its Lease and
	// token), and ends when the term does: handed over, lost, or the replica
	// leaving. Run must return soon after ctx ends: the shard is handed over only
	// once every work of its term returned.
	//
	// Returning nil ends the work for this term. Returning an error or panicking
	// while the term lasts is logged and counted (WorkStats.Failed), and the work is
	// run again, for the same term, after WorkConfig.RestartDelay. An error that
	// wraps ctx's error once ctx ended is the normal end of the work.
	Run func(ctx context.Context, t ShardTerm) error
}

// WorkConfig configures Workers. Its policy is pkg/termrun's, the single leader's
// too.
type WorkConfig struct {
	// Works are run for every shard term, each on a goroutine of its own. At least
	// one is required.
	Works []Work
	// RestartDelay is how long a work that failed (returned an error or panicked)
	// waits before it runs again in the same term (default DefaultRestartDelay, 1s).
	// Negative is refused.
	RestartDelay time.Duration
	// StepDownGrace is how long a work may fail in a row before StepDown is asked to
	// give its shard's term up (default termrun.DefaultStepDownGrace, 10s). Negative
	// is refused.
	StepDownGrace time.Duration
	// StepDown, if set, is asked to end the shard term t, once per term, when a work
	// of it failed for StepDownGrace in a row; reason wraps termrun.ErrFailing. It is
	// typically Sharder.ResignShard, and must not block. Nil never gives a term up:
	// the work restarts until the term ends.
	StepDown func(t ShardTerm, reason error) bool
	// OverstayAfter is how long after its term ended a work that has not returned
	// is reported (default OverstayWarning, 10s). Negative is refused.
	OverstayAfter time.Duration
	// Logger receives the failures, overstays and step-downs; nil discards them.
	Logger *slog.Logger
}

// WorkStats are counters of a Workers since it was created: pkg/termrun's, the
// single leader's runtime counts the same.
type WorkStats = termrun.Stats

// Workers runs leader-only work per shard: RunShard, given a shard's term context,
// runs every Work for that term on goroutines of its own (a termrun.Term) and
// returns once every work returned: after the term ended, or earlier if every work
// returned nil (the term goes on without work). Plug it into a Sharder with
//
//	sharding.Callbacks{OnAcquired: workers.RunShard}
//
// or call RunShard from an OnAcquired of your own, on its goroutine.
//
// # Isolation
//
// A work that fails, by an error or a panic, is restarted after RestartDelay while
// its term lasts; it does not stop the other works of its shard, nor the works of
// other shards, nor the Sharder. A work that keeps failing for StepDownGrace has
// its shard's term given up (StepDown). Returning once ctx ends is the work's part:
// one that does not holds back its RunShard and the hand-over of its shard, whose
// Lease is not renewed meanwhile, so that another replica takes the shard once the
// Lease expires while the work still runs (fence its writes by the shard's term).
// Such a work is reported OverstayAfter after its term ended.
//
// # Concurrency properties
//
// RunShard runs each work on a goroutine of its own, with one more per work that
// waits to report an overstay; all of them have ended when RunShard returns. Its
// methods are safe for concurrent use; create it with NewWorkers.
type Workers struct {
	works    []Work
	runner   *termrun.Runner
	stepDown func(ShardTerm, error) bool
	logger   *slog.Logger
}

// NewWorkers returns Workers running config's works. Errors wrap ErrInvalidConfig and
// name the field.
func NewWorkers(config WorkConfig) (*Workers, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	if len(config.Works) == 0 {
		bad("Works", "empty")
	}
	names := map[string]bool{}
	for i, w := range config.Works {
		switch {
		case w.Name == "":
			bad(fmt.Sprintf("Works[%d].Name", i), "empty")
		case names[w.Name]:
			bad(fmt.Sprintf("Works[%d].Name", i), "%q twice", w.Name)
		}
		names[w.Name] = true
		if w.Run == nil {
			bad(fmt.Sprintf("Works[%d].Run", i), "nil")
		}
	}
	if config.Logger == nil {
		config.Logger = slog.New(slog.DiscardHandler)
	}
	runner, err := termrun.New(termrun.Config{
		RestartDelay: config.RestartDelay, StepDownGrace: config.StepDownGrace,
		OverstayAfter: config.OverstayAfter, Logger: config.Logger,
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Workers{
		works: append([]Work(nil), config.Works...), runner: runner,
		stepDown: config.StepDown, logger: config.Logger,
	}, nil
}

// RunShard runs every work for the shard term of ctx, a shard's term context (the
// ctx of Callbacks.OnAcquired, or one derived from it), and returns once every work
// returned: after ctx ended, or earlier if they all returned nil. It logs an error
// and returns at once when ctx is not a shard's term context.
func (w *Workers) RunShard(ctx context.Context) {
	t, ok := ShardTermOf(termctx.Get(ctx))
	if !ok {
		w.logger.Error("shard work not started: the context is not a shard's term context")
		return
	}
	var stepDown func(error)
	if w.stepDown != nil {
		stepDown = func(reason error) {
			if !w.stepDown(t, reason) {
				w.logger.Warn("shard term not given up: it is over, or not this replica's", "shard", t.Shard, "term", t.Term)
			}
		}
	}
	term := w.runner.Term(ctx, stepDown)
	for _, work := range w.works {
		term.Go(work.Name, func(ctx context.Context) error { return work.Run(ctx, t) })
	}
	term.Wait()
}

// Stats returns the counters of every work.
func (w *Workers) Stats() WorkStats { return w.runner.Stats() }

// StatsByWork returns the counters of each work by its name, for the works that
// ran.
func (w *Workers) StatsByWork() map[string]WorkStats { return w.runner.WorkStats() }
