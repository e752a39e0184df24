package sharding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// DefaultRestartDelay is the default of WorkConfig.RestartDelay.
const DefaultRestartDelay = time.Second

// OverstayWarning is how long after its term ended a Work that has not returned is
// logged, once per run, as holding its shard back from being handed over.
const OverstayWarning = 10 * time.Second

// Work is leader-only work of a shard: it runs once for each term of each shard this
// replica leads, and stops when that term ends.
type Work struct {
	// Name names the work in logs. Required, unique among the works of a Workers.
	Name string
	// Run does the work of one shard term. ctx is the shard's term context
	// (termctx.Get(ctx) gives t too, with its Lease and token) and ends when the term does: handed
	// over, lost, or the replica leaving. Run must return soon after ctx ends: the
	// shard is handed over only once every work of its term returned.
	//
	// Returning nil ends the work for this term. Returning an error or panicking
	// while the term lasts is logged and counted (WorkStats.Failed), and the work is
	// run again, for the same term, after WorkConfig.RestartDelay. An error that
	// wraps ctx's error once ctx ended is the normal end of the work.
	Run func(ctx context.Context, t ShardTerm) error
}

// WorkConfig configures Workers.
type WorkConfig struct {
	// Works are run for every shard term, each on a goroutine of its own. At least
	// one is required.
	Works []Work
	// RestartDelay is how long a work that failed (returned an error or panicked)
	// waits before it runs again in the same term (default DefaultRestartDelay, 1s).
	// Negative is refused.
	RestartDelay time.Duration
	// Logger receives the failures; nil discards them.
	Logger *slog.Logger
}

// WorkStats are counters of a Workers since it was created.
type WorkStats struct {
	// Started counts the runs of works (a restart after a failure counts again).
	Started uint64
	// Failed counts the runs that returned an error or panicked while their term
	// lasted, or returned an error other than their context's after it ended.
	Failed uint64
	// Panicked counts the runs that panicked (counted in Failed too).
	Panicked uint64
	// Running is the number of runs under way now.
	Running int64
}

// Workers runs leader-only work per shard: RunShard, given a shard's term context,
// runs every Work for that term on goroutines of its own and returns once every work
// returned: after the term ended, or earlier if every work returned nil (the term
// goes on without work). Plug it into a Sharder with
//
//	sharding.Callbacks{OnAcquired: workers.RunShard}
//
// or call RunShard from an OnAcquired of your own, on its goroutine.
//
// # Isolation
//
// A work that fails, by an error or a panic, is restarted after RestartDelay while
// its term lasts; it does not stop the other works of its shard, nor the works of
// other shards, nor the Sharder. Returning once ctx ends is the work's part: one
// that does not holds back its RunShard and the hand-over of its shard, whose Lease
// is not renewed meanwhile, so that another replica takes the shard once the Lease
// expires while the work still runs (fence its writes by the shard's term). Such a
// work is logged OverstayWarning after its term ended.
//
// # Concurrency properties
//
// RunShard runs each work on a goroutine of its own, with one more per run that
// waits to log an overstay; all of them have ended when RunShard returns. Its
// methods are safe for concurrent use; create it with NewWorkers.
type Workers struct {
	works        []Work
	restartDelay time.Duration
	logger       *slog.Logger

	started, failed, panicked atomic.Uint64
	running                   atomic.Int64
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
	switch {
	case config.RestartDelay == 0:
		config.RestartDelay = DefaultRestartDelay
	case config.RestartDelay < 0:
		bad("RestartDelay", "%v is negative", config.RestartDelay)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if config.Logger == nil {
		config.Logger = slog.New(slog.DiscardHandler)
	}
	return &Workers{
		works:        append([]Work(nil), config.Works...),
		restartDelay: config.RestartDelay,
		logger:       config.Logger,
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
	var wg sync.WaitGroup
	for _, work := range w.works {
		wg.Go(func() { w.run(ctx, t, work) })
	}
	wg.Wait()
}

// warnOverstay logs once if the run of work for t has not returned OverstayWarning
// after ctx ended; returned is closed when it returns.
func (w *Workers) warnOverstay(ctx context.Context, t ShardTerm, work Work, returned <-chan struct{}) {
	select {
	case <-returned:
		return
	case <-ctx.Done():
	}
	timer := time.NewTimer(OverstayWarning)
	defer timer.Stop()
	select {
	case <-returned:
	case <-timer.C:
		w.logger.Warn("shard work has not returned since its term ended; the shard is not handed over until it does",
			"work", work.Name, "shard", t.Shard, "term", t.Term, "after", OverstayWarning)
	}
}

// run runs work for the term t until it returns nil or ctx ends, restarting it after
// each failure.
func (w *Workers) run(ctx context.Context, t ShardTerm, work Work) {
	logger := w.logger.With("work", work.Name, "shard", t.Shard, "term", t.Term)
	for {
		err := w.once(ctx, t, work)
		switch {
		case err == nil:
			return
		case ctx.Err() != nil:
			if !errors.Is(err, ctx.Err()) && !errors.Is(err, context.Cause(ctx)) {
				w.failed.Add(1)
				logger.Warn("shard work failed as its term ended", "error", err)
			}
			return
		}
		w.failed.Add(1)
		logger.Error("shard work failed; running it again after the restart delay", "error", err, "restartDelay", w.restartDelay)
		timer := time.NewTimer(w.restartDelay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// once runs work once, turning a panic into an error wrapping ErrWorkPanicked.
func (w *Workers) once(ctx context.Context, t ShardTerm, work Work) (err error) {
	w.started.Add(1)
	w.running.Add(1)
	defer w.running.Add(-1)
	returned := make(chan struct{})
	var warner sync.WaitGroup
	warner.Go(func() { w.warnOverstay(ctx, t, work, returned) })
	defer warner.Wait()
	defer close(returned)
	defer func() {
		if p := recover(); p != nil {
			w.panicked.Add(1)
			err = fmt.Errorf("%w: %v\n%s", ErrWorkPanicked, p, debug.Stack())
		}
	}()
	return work.Run(ctx, t)
}

// Stats returns the counters.
func (w *Workers) Stats() WorkStats {
	return WorkStats{
		Started: w.started.Load(), Failed: w.failed.Load(),
		Panicked: w.panicked.Load(), Running: w.running.Load(),
	}
}
