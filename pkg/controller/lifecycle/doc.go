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
// NewManager refuses a bus already started (ErrBusStarted). A campaigner starts
// only once every all-replica Syncer reports Synced (Options.CampaignUnsynced
// starts it at once). Each term starts the leader-only components under a
// context that carries the term (termctx.FromContext), waits for them to call
// Subscribed, runs the term hooks, and is ready (Options.OnTermReady) once each
// StateDependent component reported HoldsState. A leader-only run that fails is
// restarted after RestartDelay in its term, on pkg/termrun; a term that misses a
// component for StepDownGrace calls Options.StepDown. Status gives a snapshot for
// health endpoints and metrics.
//
// # Why a term ended
//
// The term's context is cancelled with a cause (context.Cause, errors.Is):
// ErrLeadershipLost (a LostLeadershipEvent, a newer term, or the end of
// Options.TermContext, whose cause it wraps), ErrSteppedDown (the Manager asked
// Options.StepDown; it wraps ErrMissingComponent) or ErrManagerStopped (Run's
// context ended; ErrBusStopped when the bus stopped under Run). The first cause
// set is kept.
//
// # Design notes
//
// The order with the bus, campaigning only with state, the steps of a term,
// subscriptions in every term, failures and overstays, stepping down and Status are
// described in full in docs/design/lifecycle.md in the repository.
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
