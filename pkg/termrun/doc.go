// Package termrun runs the leader-only work of one term, for a single leader
// (pkg/controller/lifecycle) and for each shard of a ring (sharding.Workers),
// with one restart policy and one overstay policy.
//
// # Usage
//
//	r, err := termrun.New(termrun.Config{Logger: logger})
//	term := r.Term(termCtx, resign) // termCtx: the term's context (termctx.With)
//	term.Go("publisher", publish)   // each work on a goroutine of its own
//	term.Wait()                     // returns once every work returned
//
// resign is the caller's way to give the term up (the elector's Resign, or
// one shard's); nil means the term is never given up, only reported. Once
// runs work that must not be restarted (a process's all-replica components,
// under the process's context) with the same failure report and overstay
// rule.
//
// # The policy
//
// A run of a work that returns nil while its term lasts ends the work for the
// term. A run that fails while its term lasts, by an error or a panic
// (recovered, ErrPanicked with the stack), is reported (Event Failed, the log,
// Stats.Failed) and run again RestartDelay later, under the same term. Once
// the term ended, a return of nil, a context error or the term's cause is the
// normal end; any other error is reported as a failure and not restarted.
//
// A failure streak starts at a failure and goes on while every later run fails
// within StepDownGrace of its start (a run that lasts StepDownGrace ends it); at
// the first failure StepDownGrace or more after the streak began, the Term calls
// its step-down function, once per term (Stats.StepDowns), and the work goes on
// restarting until the term ends. Why restart within the term, and why give it up
// after StepDownGrace, is in docs/design/termrun.md in the repository.
//
// Overstay: a run that has not returned OverstayAfter after its term ended
// is reported once (Event Overstayed, a WARN, Stats.Overstays), and waited
// for, never abandoned: Run does not return before it, so one work never runs
// twice at once (the shard's next term on this replica, or the single
// leader's next start of the component, waits for it). Its writes are
// refused meanwhile by the fence of its term.
//
// # Contexts
//
// Each run gets a context of its own, derived from the term's and ended when
// the run returns, so that what a failed run left behind (subscriptions,
// goroutines under its context) ends with it and not with the term. It
// carries the term (termctx.Get) and reports the term's end in Err and Done
// as soon as the term's context does, even by a clock of its own (an
// elector's renew deadline) before anything was cancelled.
//
// # Concurrency properties
//
// A Runner and its Terms are safe for concurrent use. Run works on the
// calling goroutine, with one more per call that watches for an overstay;
// both have ended when Run returns, and every goroutine Go started has ended
// when Wait returns. Config.Observe and the step-down function are called on
// those goroutines, never under a lock of this package; they must not block.
//
// This package imports only the standard library and pkg/termctx.
package termrun
