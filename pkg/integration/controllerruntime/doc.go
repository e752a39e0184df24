// Package controllerruntime runs controller-runtime controllers under Baton's leader
// election and term runtime, in place of the manager's own leader election.
//
// # Usage
//
// Build the manager with LeaderElection false, then a Runtime on it, and use the
// Runtime's manager from then on; controllers are built with this package's builder,
// the chain of controller-runtime's (For, Owns, Watches, WithEventFilter, WithOptions,
// Named, Complete):
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{HealthProbeBindAddress: ":8081"})
//	rt, err := controllerruntime.New(mgr, controllerruntime.Options{
//		LeaderElectionID: "my-controller", LeaderElectionNamespace: "default",
//	})
//	mgr = rt.Manager() // refuses controllers left on controller-runtime's builder
//	err = controllerruntime.NewControllerManagedBy(mgr).
//		For(&corev1.ConfigMap{}).
//		Owns(&corev1.Secret{}).
//		Complete(&Mirror{Reader: mgr.GetCache(), Writer: rt.FencedClient(nil)})
//	err = controllerruntime.NewControllerManagedBy(mgr).
//		For(&corev1.ConfigMap{}).
//		Named("sharded-mirror").
//		Sharded(sharding.Config{Namespace: "default"}). // every replica, each its shards
//		Complete(&Mirror{Reader: mgr.GetCache(), Writer: rt.FencedClient(nil)})
//	err = mgr.Start(ctx)
//
// The builder registers a leader-only controller with Runtime.AddController, a
// sharded one with AddShardedController (see Builder); both can be called directly.
// Runnables added to the manager directly keep running on every replica (the manager
// has no election of its own); leader-only work goes through the builder,
// AddController and AddLeaderOnly. Runtime.Manager's Add refuses a runnable the
// manager would run as leader-only work, such as a controller built with
// ctrl.NewControllerManagedBy (ErrLeaderOnlyRunnable), and Start stops the manager
// with ErrControllerLeftOnManager when it finds one running on the manager New was
// given. New refuses a manager built with LeaderElection true, and a graceful stop
// releases the Lease (Options.LeaderElectionReleaseOnCancel).
//
// # Design notes
//
// The design notes (the design and why it holds, fencing, the API server's fence,
// state for a new leader, crash failover, sharded controllers, why a controller left
// on the manager is refused, why this package is in Baton's module) are in
// docs/design/controllerruntime.md in the repository.
//
// # Term in Reconcile
//
// Reconcile's context derives from the term's, so termctx.Get gives the term (its Lease,
// shard, number and token; termctx.FromContext the number),
// and the context ends with it.
//
// # Health and metrics
//
// New adds the /healthz check HealthzCheckName and the /readyz check
// ReadyzCheckName, and registers, on
// controller-runtime's metrics registry (Options.MetricsRegisterer), the metrics of
// Baton's own runtime under the same names (pkg/controller/metrics): baton_is_leader,
// baton_term, baton_leadership_transitions_total{transition="acquired"|"lost"},
// baton_terms_ready_total, the histogram baton_term_ready_seconds and the elector's
// counters, with baton_fenced_writes_refused_total; none carries a label that changes
// with a restart. The single Lease's holder status is also
// leader_election_master_status{name=LeaderElectionID}, 1 while this replica leads, the
// gauge controller-runtime registers at init (reused, not registered twice), which
// controller-runtime projects' dashboards and alerts read. The shard Leases of sharded
// controllers are not reported there.
//
// # Concurrency properties
//
// All methods of Runtime and the fenced client are safe for concurrent use. The Runtime
// runs the elector on a goroutine of its own and one goroutine per leader-only
// component, which runs it once per term; a term's controllers and functions have returned, or are reported as
// overstaying after GracefulShutdownTimeout, before that component is started for a
// later term. Start returns when the manager's context ended and the runtime stopped.
package controllerruntime
