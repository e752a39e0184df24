package termrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// Defaults of Config.
const (
	DefaultRestartDelay  = time.Second
	DefaultStepDownGrace = 10 * time.Second
	DefaultOverstayAfter = 10 * time.Second
)

// Errors of the package. Wrapped errors can be tested with errors.Is.
var (
	// ErrInvalidConfig is wrapped by New's errors, which name the field.
	ErrInvalidConfig = errors.New("termrun: invalid config")
	// ErrPanicked is wrapped by the error of a run that panicked (with the panic
	// value and the stack); a work that recovered a panic of its own may wrap it
	// too, to be counted as one.
	ErrPanicked = errors.New("termrun: work panicked")
	// ErrFailing is wrapped by the reason given to a Term's step-down function:
	// a work failed for StepDownGrace in a row.
	ErrFailing = errors.New("termrun: leader-only work keeps failing")
	// ErrRunEnded is the cause of a run's context once the run returned.
	ErrRunEnded = errors.New("termrun: run returned")
)

// Config configures a Runner. The zero value takes the default written on each
// field.
type Config struct {
	// RestartDelay is how long a work whose run failed waits before it runs
	// again in the same term. Zero means DefaultRestartDelay (1s); negative is
	// refused.
	RestartDelay time.Duration
	// StepDownGrace is how long a work may fail in a row before its term is
	// given up (see the package doc). Zero means DefaultStepDownGrace (10s);
	// negative is refused.
	StepDownGrace time.Duration
	// OverstayAfter is how long after its term ended a run that has not returned
	// is reported as overstaying. Zero means DefaultOverstayAfter (10s); negative
	// is refused.
	OverstayAfter time.Duration
	// Logger receives the failures, overstays and step-downs; nil discards them.
	Logger *slog.Logger
	// Observe, if set, is called with every Event, on the goroutine of the work
	// it is about; it must not block.
	Observe func(Event)
}

// Kind says what an Event reports.
type Kind int

// Kinds of Event.
const (
	// Failed: a run returned an error or panicked while its term lasted
	// (Restart is true: it runs again after RestartDelay; false for Once), or
	// returned an error other than its term's end once the term ended
	// (Restart is false).
	Failed Kind = iota + 1
	// Overstayed: a run had not returned OverstayAfter after its term ended.
	Overstayed
	// SteppedDown: a work failed for StepDownGrace in a row and the Term asked
	// its step-down function to give the term up.
	SteppedDown
)

var kindNames = [...]string{"", "failed", "overstayed", "stepped down"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is what a Runner reports about a work of a term.
type Event struct {
	Kind Kind
	// Work is the work's name, Term the term it ran in.
	Work string
	Term termctx.Term
	// Err is the run's error (Failed) or the reason given to the step-down
	// function (SteppedDown, wrapping ErrFailing).
	Err error
	// Panicked is true for a Failed run that panicked or returned ErrPanicked.
	Panicked bool
	// Restart is true for a Failed run that runs again after RestartDelay.
	Restart bool
	// Waited is how long after the term's end an Overstayed run had not returned.
	Waited time.Duration
}

// Stats are counters of a Runner since New.
type Stats struct {
	// Started counts the runs of works (a restart counts again).
	Started uint64
	// Failed counts the runs that failed (Event Failed).
	Failed uint64
	// Panicked counts the failed runs that panicked (counted in Failed too).
	Panicked uint64
	// Overstays counts the runs reported as overstaying their term.
	Overstays uint64
	// StepDowns counts the terms given up for a work that kept failing.
	StepDowns uint64
	// Running is the number of runs under way now.
	Running int64
}

// Runner runs the works of terms under one policy. Create it with New; its
// methods are safe for concurrent use.
type Runner struct {
	config Config
	// total counts every work; works has a *counters per work name.
	total counters
	works sync.Map
}

// counters are the atomic form of Stats.
type counters struct {
	started, failed, panicked, overstays, stepDowns atomic.Uint64
	running                                         atomic.Int64
}

func (c *counters) stats() Stats {
	return Stats{
		Started: c.started.Load(), Failed: c.failed.Load(), Panicked: c.panicked.Load(),
		Overstays: c.overstays.Load(), StepDowns: c.stepDowns.Load(), Running: c.running.Load(),
	}
}

// count applies f to the total and to work's counters.
func (r *Runner) count(work string, f func(*counters)) {
	f(&r.total)
	c, ok := r.works.Load(work)
	if !ok {
		c, _ = r.works.LoadOrStore(work, &counters{})
	}
	f(c.(*counters))
}

// New returns a Runner of config. Errors wrap ErrInvalidConfig and name the
// field.
func New(config Config) (*Runner, error) {
	var errs []error
	for _, d := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{
		{"RestartDelay", &config.RestartDelay, DefaultRestartDelay},
		{"StepDownGrace", &config.StepDownGrace, DefaultStepDownGrace},
		{"OverstayAfter", &config.OverstayAfter, DefaultOverstayAfter},
	} {
		switch {
		case *d.value < 0:
			errs = append(errs, fmt.Errorf("%w: %s: %v is negative", ErrInvalidConfig, d.name, *d.value))
		case *d.value == 0:
			*d.value = d.def
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if config.Logger == nil {
		config.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{config: config}, nil
}

// Term returns the Term of ctx, a term's context (stamped with termctx.With,
// or derived from one), whose end is the end of its works. stepDown, if not
// nil, is called at most once, when a work failed for StepDownGrace in a row,
// with a reason wrapping ErrFailing; it should give the term up (resign), and
// must not block. Nil never gives the term up.
func (r *Runner) Term(ctx context.Context, stepDown func(reason error)) *Term {
	t, _ := termctx.Get(ctx)
	return &Term{r: r, ctx: ctx, term: t, stepDown: stepDown}
}

// Stats returns the counters of every work.
func (r *Runner) Stats() Stats { return r.total.stats() }

// WorkStats returns the counters of each work by name, for the works that ran.
func (r *Runner) WorkStats() map[string]Stats {
	out := map[string]Stats{}
	r.works.Range(func(name, c any) bool {
		out[name.(string)] = c.(*counters).stats()
		return true
	})
	return out
}

// observe counts ev, logs it and hands it to Config.Observe.
func (r *Runner) observe(ev Event) {
	log := func(level slog.Level, msg string, attrs ...any) {
		r.config.Logger.Log(context.Background(), level, msg, append(logAttrs(ev), attrs...)...)
	}
	switch ev.Kind {
	case Failed:
		r.count(ev.Work, func(c *counters) {
			c.failed.Add(1)
			if ev.Panicked {
				c.panicked.Add(1)
			}
		})
		if ev.Restart {
			log(slog.LevelError, "leader-only work failed; running it again after the restart delay",
				"error", ev.Err, "restartDelay", r.config.RestartDelay)
		} else {
			log(slog.LevelError, "work failed; it is not run again", "error", ev.Err)
		}
	case Overstayed:
		r.count(ev.Work, func(c *counters) { c.overstays.Add(1) })
		log(slog.LevelWarn, "leader-only work has not returned since its term ended; waiting for it", "after", ev.Waited)
	case SteppedDown:
		r.count(ev.Work, func(c *counters) { c.stepDowns.Add(1) })
		log(slog.LevelError, "leader-only work keeps failing; giving the term up so that another replica leads", "reason", ev.Err)
	}
	if r.config.Observe != nil {
		r.config.Observe(ev)
	}
}

// logAttrs names the work and its term: the shard too for a shard's term.
func logAttrs(ev Event) []any {
	attrs := []any{"work", ev.Work}
	if ev.Term.Sharded() {
		attrs = append(attrs, "shard", ev.Term.Shard)
	}
	return append(attrs, "term", ev.Term.Number)
}
