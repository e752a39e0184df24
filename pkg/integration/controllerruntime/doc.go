// Package controllerruntime runs controller-runtime controllers under Baton's leader
// election and term runtime, in place of the manager's own leader election.
//
// # Usage
//
// Build the manager with LeaderElection false, then a Runtime on it, and register the
// leader-only controllers with the Runtime instead of the manager:
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{HealthProbeBindAddress: ":8081"})
//	rt, err := controllerruntime.New(mgr, controllerruntime.Options{
//		LeaderElectionID: "my-controller", LeaderElectionNamespace: "default",
//	})
//	err = rt.AddController(controllerruntime.Controller{
//		Name:       "mirror",
//		Reconciler: &Mirror{Reader: mgr.GetCache(), Writer: rt.FencedClient(nil)},
//		Watches:    []controllerruntime.Watch{{Object: &corev1.ConfigMap{}}},
//	})
//	err = mgr.Start(ctx)
//
// Runnables added to the manager directly keep running on every replica (the manager
// has no election of its own); leader-only work goes through AddController and
// AddLeaderOnly. A controller built with ctrl.NewControllerManagedBy(mgr) is such a
// runnable: it runs outside any term, and its fenced writes fail with ErrNoTerm.
// New refuses a manager built with LeaderElection true, and a graceful stop releases
// the Lease (Options.LeaderElectionReleaseOnCancel).
//
// # Design notes
//
// The design notes (the design and why it holds, fencing, the API server's fence,
// state for a new leader, crash failover, sharded controllers) are in
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
// New adds the /healthz check HealthzCheckName (fails while the replica believes it
// leads but missed its renew deadline, or a component failed) and the /readyz check
// ReadyzCheckName (fails until the informers are warm), and registers baton_is_leader,
// baton_term, baton_terms_total, baton_terms_ready_total,
// baton_fenced_writes_refused_total and the histogram baton_term_ready_seconds on
// controller-runtime's metrics registry (Options.MetricsRegisterer).
//
// # Dependencies
//
// The package lives in Baton's module: controller-runtime is already required by the
// module (the integration tests' envtest), and Go's module graph pruning (go 1.17+)
// means a program that imports only the core packages neither builds nor downloads
// controller-runtime's packages; its go.sum needs only the module's go.mod line.
// A separate module would double the release and replace bookkeeping for no gain.
//
// # Concurrency properties
//
// All methods of Runtime and the fenced client are safe for concurrent use. The Runtime
// runs the elector on a goroutine of its own and one goroutine per leader-only
// component, which runs it once per term; a term's controllers and functions have returned, or are reported as
// overstaying after GracefulShutdownTimeout, before that component is started for a
// later term. Start returns when the manager's context ended and the runtime stopped.
package controllerruntime
