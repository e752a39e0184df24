// Package lifecycle is the controller runtime: a Manager that runs
// all-replica components for the life of the process and leader-only
// components once per leadership term, and orders a new leader's start so
// that the state replayed to it is never published before its leader-only
// subscriptions exist.
//
// # Usage
//
// Create the bus, the Manager and every all-replica component, then start
// the bus, then run:
//
//	bus := busevents.NewEventBus(1024)
//	m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: logger})
//	m.AddCampaigner(elector)                              // starts once the Syncers synced
//	m.AddAllReplica(configHandler)                        // subscribes in its constructor
//	m.AddLeaderOnly(publisher)                            // subscribes in Start
//	m.AddReplayer("config", configHandler.Replayer())      // replayers first,
//	m.AddTermHook("reconcile", rec.TriggerNow)            // then other hooks
//	bus.Start()
//	err = m.Run(ctx)
//
// # Ordering with the bus
//
// NewManager subscribes to BecameLeaderEvent and LostLeadershipEvent at
// once, with a Critical subscription, and refuses (ErrBusStarted) a bus
// that is already started: the order "manager before bus.Start" cannot be got
// wrong silently. Run itself may be called before or after bus.Start;
// leadership events wait in the subscription's buffer until Run reads them.
//
// # Campaigning only with state
//
// The component that campaigns for leadership (the election adapter) is
// registered with AddCampaigner: an all-replica component that the Manager
// starts only once every all-replica component implementing Syncer (the
// configuration handler, the discovery) reports Synced. A replica that has
// not read the state a leader needs therefore never takes the lease;
// Status.CampaignWaiting says it waits, and the log says for whom.
// Options.CampaignUnsynced starts it at once instead.
//
// # A term
//
// On a BecameLeaderEvent with a term newer than any seen, the Manager:
//
//  1. starts every leader-only component, in registration order, each on
//     a goroutine of its own, under a context that carries the term
//     (termctx.FromContext);
//  2. waits until each has called Subscribed, has returned, or has let
//     SubscribeTimeout pass (reported as an overstay of the "subscribe"
//     phase);
//  3. runs the term hooks in registration order: the replayers added with
//     AddReplayer, then hooks such as the reconciler's trigger. A component
//     that calls Subscribed after this point gets the replayers run once more
//     (the bus's sequence check keeps anyone holding newer state from seeing
//     them twice);
//  4. declares the term ready once every leader-only component started in
//     it (none is still running from an earlier term) and every
//     StateDependent one reported HoldsState for each type in its
//     RequiredState: it logs "term ready" and calls Options.OnTermReady
//     with a TermReport, whose latency runs from the BecameLeaderEvent's
//     timestamp (the lease acquisition).
//
// The term ends on a LostLeadershipEvent for it (or for a later or unknown
// term), on a BecameLeaderEvent with a newer term, and when Run's context
// ends: the Manager cancels the term's context, waits up to StopTimeout for
// its components to return and calls Options.OnTermStopped with a
// TermStopReport. BecameLeaderEvents repeating the current term, or for a
// term not newer than the last one started, are ignored; so are
// LostLeadershipEvents for an earlier term.
//
// With Options.TermContext (wired to the elector's term context) the
// term's context also ends when the elector's does, and reports the term
// over the moment the elector's does: by the elector's own clock, so a
// replica resumed after a pause past its renew deadline sees
// ctx.Err() != nil at once, before any event was handled.
//
// # Why a term ended
//
// The term's context is cancelled with a cause that a component reads with
// context.Cause(ctx), and tests with errors.Is:
//
//   - ErrLeadershipLost: this replica no longer leads in the term: a
//     LostLeadershipEvent for it (the cause carries the event's reason), a
//     newer term, or the end of the elector's term context given by
//     Options.TermContext, whose own cause it wraps (for the elector of
//     pkg/k8s/leaderelection: ErrLeaseLost, ErrRenewDeadlineMissed, ...);
//   - ErrSteppedDown: the Manager asked Options.StepDown to end the term
//     (see below); it wraps the reason, ErrMissingComponent (and
//     termrun.ErrFailing for a component that kept failing). It wins over
//     the cause of the source's end that the step-down brings about;
//   - ErrManagerStopped: Run's context ended (ErrBusStopped when the bus
//     stopped under Run). The all-replica components' context ends with
//     the same cause.
//
// The first cause set is kept: a context that ended for one reason does not
// change its cause when the Manager learns of another.
//
// The next term starts the same instances again, in place. Per-term state
// of the Manager (who subscribed, who holds what) is new for each term; the
// components reset their own at the top of Start.
//
// # Subscriptions in every term
//
// A leader-only component subscribes at the top of every Start, with
// busevents.Subscribe[T] under the run's context, as any component does.
// Each call returns a new channel, routed from the call on and reached by
// the term's replays as any new subscription is; the bus closes it when
// the term's context ends.
//
// # Failures and overstays
//
// The leader-only components of a term run on the per-term runner of
// pkg/termrun, the one sharding.Workers runs shard work on, with its policy
// (its package doc says why):
//
//   - A run that returns while its context is live (an error, nil:
//     ErrReturnedEarly, or a panic, recovered with its stack) failed: it is
//     logged, counted in Status and published as ComponentFailedEvent, the
//     term misses the component (Status.Missing, Healthy) and the runner
//     starts it again RestartDelay later, in the same term, under a new
//     run's context (the failed run's ended with termrun.ErrRunEnded, and
//     its subscriptions with it). The new run calls Subscribed and
//     HoldsState afresh and gets the replays as any late subscriber does.
//   - Only a return after the context ended, with nil, a context error or
//     the context's cause (context.Cause), is a clean stop; any other is a
//     failure, not restarted.
//   - A run still going StopTimeout after its term ended is logged, counted,
//     published as ComponentOverstayedEvent (phase "stop") and shown as
//     StateOverstaying. The Manager stops waiting for it but never runs two
//     Starts of one component at once: it is started in a later term only
//     once its earlier Start returned (late in that term if it returns
//     during it, followed by the replays as for any late subscriber).
//
// The all-replica components run once each on the same runner
// (termrun.Term.Once, under Run's context), with the same failure report and
// overstay rule: a failed one is not restarted and Run keeps going (the rest
// of the replica keeps serving, and Status.Healthy reports the failure so
// that /healthz can fail and the process be restarted by its supervisor);
// one still running StopTimeout after Run's context ended is reported as
// overstaying, and Run returns without it (Done waits for it).
//
// # A leader missing a component steps down
//
// A term misses a leader-only component while that component is still
// running from an earlier term (it overstayed that term's end, so it cannot
// be started in this one) or its last run failed and it waits for its
// restart. A leader missing a component is not doing its job: the moment
// the term starts to miss one, Status.Missing names it, Status.Healthy
// fails, the Manager logs it at error level and counts the term
// (Status.MissingTerms). The Manager calls Options.StepDown (wired to the
// elector's resignation) once for the term, so that another replica leads,
// when a component has been running from an earlier term for
// Options.StepDownGrace, or has failed for StepDownGrace in a row
// (termrun's rule: every run since the first failure failed within the
// grace of its start); it logs and counts that too (Status.StepDowns).
// Without a StepDown the Manager only reports, and a failing component is
// restarted until the term ends.
//
// # Status
//
// Status returns a snapshot for health endpoints and metrics: whether Run
// runs, whether this replica leads and in which term, whether the term is
// ready, the last term-ready report (with its latency), counters of terms,
// ready terms, failures, panics, overstays, subscribe timeouts, terms that
// missed a component, step-downs and dropped leadership events, the
// components the current term misses, and per component its state, term,
// last error, subscription and held state in the current term and its own
// counters.
//
// # Concurrency properties
//
// All methods are safe for concurrent use. Run works on the goroutine that
// calls it, which handles leadership events, runs the term hooks and the
// callbacks. Every run of a component (all-replica once, leader-only once
// per term) is a goroutine of its own. Subscribed, HoldsState and Status
// never block on anything but a short internal mutex, which is never held
// while calling out (components, hooks, callbacks, the bus). Run returns
// once every component it started returned or overstayed; Done's channel
// tells when the last overstaying component has returned too. While Run
// waits for a term to stop, leadership events queue in its subscription's
// buffer; the stop is bounded by StopTimeout.
package lifecycle
