// Package app assembles one Baton replica: the event bus, the controller
// runtime, the election adapter and the reference components, wired in the
// one order that works, with its metrics and health endpoints. The command
// (cmd/baton) uses it for both of its modes: `baton run` against a
// Kubernetes cluster (Cluster) and `baton demo`, several replicas in one
// process (Embedded).
//
// # Usage
//
//	opts, err := app.Cluster(app.ClusterConfig{Clientset: cs, Identity: pod, Namespace: "baton", ...})
//	r, err := app.New(opts)
//	http.Handle("/", r.Handler()) // /metrics, /healthz, /readyz
//	err = r.Run(ctx)              // until ctx ends
//
// # Wiring order
//
// New builds, in this order:
//
//  1. the bus (not started);
//  2. the election adapter, leaderelection.NewWithStore, on the lease store
//     wrapped to observe takeovers (for baton_handover_seconds);
//  3. the lifecycle.Manager, before the bus starts (it subscribes to
//     leadership at once), with TermContext set to the adapter's, so that a
//     term's components see the term over by the elector's own clock;
//  4. the all-replica components: the election adapter, the
//     ConfigChangeHandler, the Discovery, the Reconciler, then
//     Options.AllReplica's; those that consume events (the Reconciler)
//     subscribe in their constructor, before the bus starts;
//  5. the leader-only components, which subscribe in Start, once per term:
//     ConfigPublisher (publishing the Coordinator's renders: it subscribes
//     before the Coordinator can render, since every leader-only component
//     has subscribed before the term hooks trigger the first render),
//     DeploymentScheduler, Coordinator;
//  6. the term hooks, in the order they run at the start of each term: the
//     replayers ("config": the ConfigChangeHandler's, "pods": the
//     Discovery's), then the Reconciler's TriggerNow ("reconcile"), so that
//     the first render of a term is made from the replayed state;
//  7. the metrics, reading all of the above at scrape time: the core's
//     (pkg/controller/metrics: bus, election, terms, components) and the
//     reference controller's own (pkg/controller/metrics/reference:
//     configuration documents, publisher writes), in one registry.
//
// Run starts the bus and runs the Manager; callers may subscribe to the bus
// between New and Run, as all-replica observers. A replica that will not be
// run is released with Close, which stops its bus.
//
// # Health
//
// Healthy (served as /healthz) is the core's check (metrics.Sources.Healthy):
// it fails while this replica believes it holds
// the lease but has missed its renew deadline (the elector's Healthy), and
// when the runtime reports a failed component (lifecycle.Status.Healthy),
// including, while leading, a leader-only component the term misses.
// Ready (/readyz) is true once the runtime runs, the configuration handler
// has a valid configuration in force and the Discovery has published its
// first pod set (the all-replica side has synced), and not while this
// replica leads a term that misses a leader-only component. Such a leader
// resigns after Options.StepDownGrace (the runtime's StepDown is wired to
// the elector's Resign), so that another replica leads.
//
// # Embedded mode
//
// Embedded is the stand-in for a cluster shared by the replicas of one
// process: one k8sle.MemoryStore lease, one in-memory published object, a
// configuration Document and a PodSet that play the ConfigMap and the pods.
// Each replica reads the Document and the PodSet through its own
// ConfigChangeHandler and simulated Discovery, as replicas of a cluster read
// the API server through their own informers.
//
// # Concurrency properties
//
// A Replica's accessors, Healthy, Ready and Handler are safe for concurrent
// use at any time. Run is called once; it returns after the Manager
// stopped every component (or StopTimeout passed) and the bus was stopped,
// and Done's channel, closed by Run as it returns, tells the same to other
// goroutines. The lease store wrapper owns one goroutine per open watch,
// which ends when the watch does. Document, PodSet and Embedded are safe for
// concurrent use.
package app
