// Package reconciler drives the render-validate pipeline: the all-replica
// Reconciler decides when to reconcile, the leader-only Coordinator does it.
//
// # Usage
//
// Wire both into the lifecycle Manager; the Reconciler subscribes in its
// constructor, so it is made before bus.Start:
//
//	rec, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Logger: logger})
//	coord, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Logger: logger})
//	m.AddAllReplica(rec)
//	m.AddLeaderOnly(coord)
//	m.AddReplayer("config", configHandler.Replayer()) // the replayers first,
//	m.AddReplayer("pods", discovery.Replayer())
//	m.AddTermHook("reconcile", rec.TriggerNow)        // then the fresh trigger
//	bus.Start()
//
// # Reconciler (all replicas)
//
// The Reconciler turns ConfigValidatedEvent and HAProxyPodsDiscoveredEvent
// into ReconciliationTriggeredEvent, debounced: a change opens a window, a
// trigger is published once no change came for Debounce, or at the latest
// MaxDelay after the window opened, so a burst gives one trigger and a
// stream that never goes quiet still gives one every MaxDelay. An event that
// repeats the last configuration version or pod generation seen (a replay,
// a re-validation of unchanged content) is not a change. TriggerNow
// publishes a trigger at once, with reason "became leader": it is the term
// hook that makes a new leader render afresh.
//
// # Coordinator (leader only), and why it needs no replay of renders
//
// The Coordinator starts with each term, subscribes (busevents.Subscribe[T]
// under the term's context, so leader-only by its registration) to the
// configuration, the pods and the triggers, and keeps the newest of each
// input. It receives the inputs through the replayers of the all-replica
// side, which the Manager runs after it subscribed; then the TriggerNow hook
// makes it render. A render is a pure function of those inputs
// (pkg/controller/pipeline), so there is nothing to hand over from the
// previous leader: render and validation events are never replayed, and a
// new leader's first TemplateRenderedEvent is built from the newest state
// that existed when it was elected.
//
// For each trigger it runs Pipeline.Execute on the newest inputs it holds
// and publishes TemplateRenderedEvent (valid output) or
// ValidationFailedEvent (the validator's line errors, or the pipeline's
// error), stamped with the term (termctx.FromContext), the
// configuration version and the pod generation. A trigger that finds an
// input missing waits for it. It reports lifecycle.HoldsState for the
// configuration and the pods, which it lists in RequiredState.
//
// # Render cache
//
// Because a render is a pure function of its input, the Coordinator keeps
// the outcome of its last run that returned no error (valid or with
// findings), keyed by the configuration version and pod generation and by
// the configuration and pod set themselves (by identity), across terms. A
// run on the same input publishes that outcome again, stamped with the
// current term, without running the pipeline: a new leader whose inputs did
// not change since its last term renders nothing. Either input changing
// makes a new key; an error is never cached. LastRun.Cached tells such an
// outcome apart; CoordinatorOptions.NoRenderCache turns the cache off for a
// Pipeline whose steps depend on more than their Input.
//
// # Concurrency properties
//
// Reconciler.Start and Coordinator.Start each run one event loop on the
// caller's goroutine. The Coordinator runs the pipeline on one extra
// goroutine per run, which Start owns: never more than one at a time, and
// Start waits for it before returning. While a run is in flight the loop
// keeps taking events, so triggers that arrive meanwhile, however many,
// coalesce into exactly one follow-up run on the newest inputs. Triggers
// and state share one latest-value subscription: a full buffer coalesces
// queued triggers into the newest instead of losing them, a trigger stays
// behind the state published before it, and a run starts only after every
// event already queued was taken, so it renders the newest inputs the bus
// accepted. With CoordinatorOptions.Latest (the replica wires the
// all-replica replayers' Get) a run starts from the newest state handed out,
// also when a full buffer replaced a waiting version of state with a newer
// one behind a later trigger. A panic in a pipeline step is recovered on the run's
// goroutine, logged with its stack, and fails the Coordinator's term
// (ErrPipelinePanicked). Neither component calls out while holding its mutex,
// which guards only the snapshots returned by Stats and Status. TriggerNow
// runs on its caller's goroutine and never blocks.
//
// Channels: the components hand out none. The Reconciler's subscription is
// closed by the bus when it stops. The Coordinator subscribes with
// busevents.Subscribe[T] under the term's context: the subscription ends
// when the term does (the Manager's scope reuses its record in the next
// term), and when the bus stops (Start then returns ErrSubscriptionClosed).
//
// # Logging
//
// Both log with the *slog.Logger of their options, slog.Default() when nil:
// "triggering a fresh reconciliation" (TriggerNow), "reconciliation waits
// for its inputs", "rendered configuration", "rendered configuration is
// invalid; the last valid one stays", "reconciliation failed".
package reconciler
