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
// ctrl.NewControllerManagedBy (ErrLeaderOnlyRunnable, naming what to use instead):
// on the manager New was given, such a controller would run outside any term, and
// its fenced writes fail with ErrNoTerm. New refuses a manager built with
// LeaderElection true, and a graceful stop releases the Lease
// (Options.LeaderElectionReleaseOnCancel).
//
// # Design, and why it holds
//
// The manager's election ends the process when the lease is lost: a controller cannot
// be started twice, so controller-runtime has no way to stop leader-only work and
// start it again later. Here the unit of leader-only work is a term, not a process:
//
//   - The Runtime is a runnable every replica runs (NeedLeaderElection false). It runs
//     pkg/k8s/leaderelection's elector (through the pkg/controller/leaderelection
//     adapter) and pkg/controller/lifecycle's Manager, which starts every leader-only
//     component when a term starts and cancels it when the term ends. The elector
//     campaigns again in place, so losing the lease costs one term, never the process.
//     A term missing a leader-only controller (its build failed, or it is still
//     stopping from the last term) is resigned after the runtime's StepDownGrace, so
//     that another replica leads.
//   - Each term runs controller instances of its own, built with
//     controller.NewUnmanaged (name validation skipped: every instance reuses the
//     name) and started under the term's context; the term's end cancels that context,
//     and Start returns once the workers finished. No instance outlives its term, so no
//     controller is ever started twice.
//   - The sources are source.Kind on the manager's shared cache, which runs for the
//     life of the process on every replica. Before it campaigns, a replica builds the
//     next term's instance of each controller and starts its sources with
//     controller-runtime's Warmup, which syncs the informers of every registered Watch
//     (then /readyz passes): the queue fills from the synced informers while the
//     replica follows. At election only the workers start, so the first reconcile
//     follows within a millisecond, with no list and without the 100ms poll a new
//     source's handler sync costs. The next instance is warmed again when a term ends.
//   - The term's context reports the term over by the elector's own monotonic clock
//     (lifecycle.Options.TermContext): once the renew deadline passed since the last
//     successful renew, its Err is non-nil at the call, even before any goroutine ran
//     to cancel it, which covers a process resumed after a pause.
//
// # Term in Reconcile
//
// Reconcile's context derives from the term's, so termctx.FromContext gives the term,
// and the context ends with it.
//
// # Fencing
//
// FencedClient (or NewFencedClient) wraps a client.Client; reads pass through, and every
// write is refused:
//
//   - client-side, with ErrTermEnded, once the term of the write's context ended by the
//     elector's lazy clock check (TermEnded), and with ErrNoTerm outside any term;
//   - by the stamp and a precondition: every write stamps the writer's term in the
//     annotation TermAnnotation (Create, Update, every patch type, raw bodies included,
//     and Apply); a write over an object stamped with a newer term is refused
//     (ErrStaleTerm); and every write but Create and Apply is a compare-and-swap on the
//     version it checked. Update must carry the resourceVersion the object was read at
//     (ErrNoResourceVersion otherwise); Patch adds the resourceVersion of obj to the
//     patch body (obj without one is read first); Delete reads an object given by name
//     (no resourceVersion), checks its stamp, and deletes it under UID and
//     resourceVersion preconditions; DeleteAllOf lists the objects and deletes each as
//     Delete does (so it is several requests, no longer one);
//   - by the API server, with Options.ServerSideFence and the policy of
//     NewAdmissionFence, and for sharded controllers NewShardedAdmissionFence's
//     (below).
//
// Every refusal (also ErrNoResourceVersion, ErrNoTerm and the API server's fence) is
// counted in baton_fenced_writes_refused_total.
//
// Why the stamp plus the precondition: a stale leader's write can only land on the
// version it read. If a newer term wrote the object since, the version changed and the
// API server refuses the write (conflict); if the stale leader read the newer term's
// write, it sees the newer stamp and refuses itself. Either way a write of an ended term
// never replaces a newer term's. What the client alone cannot cover: a stale write in
// flight to an object no newer term has written yet (a Create of an object the newer
// term deleted, or any write to one it did not touch: it lands, and the new leader's
// next reconcile overwrites it), Apply (no version: an apply may create), and
// subresources (their writes ignore metadata: the stamp is compared, not written). The
// API server's fence closes the first two. The stamp check trusts the object as read:
// do not set, change or drop the stamps yourself (replace Annotations by adding to them,
// not by a new map; a JSON patch that replaces metadata.annotations as a whole drops
// them).
//
// A stamp of no term: an object can carry a term above every term this Lease ever had
// (restored from another cluster, whose Lease counted further, or written by another
// program). Before it refuses a write for a newer stamp, Runtime.FencedClient reads the
// Lease once: if this replica still holds it in the writer's term, no term of this
// Lease wrote that stamp (a later term needs a later acquisition, which would have
// ended this one), so it overwrites the stamp, under the version precondition, and
// logs a WARN naming the object and the stamp. Otherwise it refuses as above. So after a
// restore from another cluster the objects' stamps are taken over by the first write of
// the current leader, one WARN per object; a restore of this cluster's own etcd (the
// Lease's versions go back with it) is the elector's case, see pkg/k8s/leaderelection,
// # Terms. NewFencedClient knows no Lease and refuses.
//
// # The API server's fence
//
// NewAdmissionFence builds a ValidatingAdmissionPolicy (no webhook to run) whose
// parameter is the Lease, and its binding; deploy/ has an example. It refuses a stamped
// write (one carrying HolderAnnotation) of the controller's users to the resources
// named unless the object (for a DELETE the object deleted) carries the Lease token of
// the current term: HolderAnnotation and
// AcquiredAnnotation equal to the Lease's holderIdentity and acquireTime. A term of
// Baton's elector is one acquisition: its acquiring write sets both and every renew
// keeps them, so the pair names the term on the Lease. (The term number cannot be
// compared: it is the resourceVersion of the acquiring write, which the renews move on.)
// With Options.ServerSideFence the fenced clients read the Lease once per term for the
// token, stamp it on every write, and stamp an object before deleting it (one more
// write per Delete, unless the object already carries the token), so that the policy
// can check the delete. Install the policy first, then turn the option on: writes
// without the token are not judged.
//
// Then every stale write the client cannot see, held in flight and delivered after
// the Lease passed to another replica, is refused by the API server itself (HTTP 403,
// "baton fence: ..."): Update, Create of an object the newer term deleted, Delete by
// name, merge, strategic merge and JSON patches, and Apply (TestAdmissionFenceRefusesStaleWrites).
//
// The window it leaves: the API server reads the Lease through an informer, so its view
// lags the Lease. Measured on one local API server on a loaded 2-core machine
// (TestAdmissionFenceWindow, 70 hand-overs in four runs), the old holder's writes still
// passed for a median of 2–3 ms and at most 14 ms after the Lease update was answered;
// a stale write arriving within that window lands. A new leader's first writes in that window are
// refused against the old holder: the fenced client sends such a write again after 5,
// 10, 20, 40 and 80 ms while its term runs. What the fence does not cover: writers that
// do not stamp the token (it is cooperative: it stops a stale writer, it does not
// authenticate one; anyone with write access can forge or drop a stamp), users other
// than AdmissionFence.Users, subresources
// (status, scale), and a policy that is not yet in force (it took effect 0.2 to 0.8 s
// after it was created). While the Lease does not exist, every write of those users to
// those resources is refused, stamped or not.
//
// Shards: NewShardedAdmissionFence builds the fence of a sharded controller's ring, a
// policy whose parameters are the ring's shard Leases, with one binding per shard that
// names its Lease. With Options.ServerSideFence, a sharded reconcile's fenced writes
// carry the name of the shard's Lease (ShardLeaseAnnotation) and its token of the
// shard term (ShardHolderAnnotation, ShardAcquiredAnnotation), read once per shard
// term, and objects are stamped before they are deleted, as above. The binding of the
// Lease a write names refuses it unless the token is that Lease's current holder and
// acquireTime; the other bindings pass it. So a stale write of an ended shard term,
// held in flight and delivered after the shard's Lease passed to another replica (or
// was released), is refused with HTTP 403, each kind listed above, while the writes of
// the shard's new term and of the other shards pass
// (TestShardedAdmissionFenceRefusesStaleWrites). The two fences use their own
// annotations, so the single leader's judges no shard write and the ring's no
// leader-only write; both can be installed for the same users and resources.
//
// A shard Lease deleted is covered: while any shard Lease of the ring does not exist,
// every write of those users to those resources is refused (HTTP 422, the missing
// binding's parameterNotFoundAction), whichever shard it names, so a stale write naming
// the deleted Lease never lands; once the Lease exists again only its new token passes
// (TestShardedAdmissionFenceWithoutAShardLease). These 422 refusals carry no "baton
// fence:" message: the fenced client neither sends them again nor counts them in
// baton_fenced_writes_refused_total, and a reconcile gets them as errors (it is
// requeued). This is why each shard has a binding of its own, rather than one binding
// selecting the ring's Leases by label (which would need the Leases labelled): the
// v1.37.2 API server evaluates a policy once per selected Lease, from its cache, so a
// write naming a Lease missing from the set (deleted, or not yet in the cache) would
// pass, while a Lease named by a binding is read from the API when the cache misses it
// and refuses the write when it does not exist. Not covered for shards, beyond what the single
// leader's fence leaves (the window after a hand-over, which the shard's Lease has
// too: 2–6 ms in that test on the loaded machine; writers that do not stamp; other
// users; subresources): an object written under two shard Leases (two shards, two
// rings, or a ring and the single leader), whose stamps one fence judges against the
// other's Lease (write each object from one shard only, see # Sharded controllers);
// and a ring whose Shards differs from the policy's (a write naming a shard Lease
// without a binding is not judged: regenerate the bindings with the ring).
//
// The cost: each write of those users to those resources goes through every binding
// of the ring (a cached Lease look-up and the match conditions per shard; the
// validations run for the named Lease only). Measured on one local API server on a
// loaded 2-core machine (TestShardedAdmissionFenceCost, 300 dry-run creates per ring,
// each ring in a process of its own), a passing write's median latency rose from
// about 2.2 ms by up to 0.6 ms with 1 shard, 0.5–2.7 ms with 16 and 4.0–5.8 ms with 64.
//
// Do not delete the last policy whose parameter is a Lease and create it again on a
// running API server: kube-apiserver v1.37.2 then stops its informer of Leases, and a
// policy created later judges by the Leases as that informer last held them, so the
// old holder's token passes and the new holder's is refused, for either fence
// (TestAdmissionFenceFollowsTheLeaseAfterThePolicyIsRecreated, BATON_PROBE_PARAM_CACHE=1,
// reproduces it; a Lease the informer never held is read from the API, fresh).
//
// # State for a new leader
//
// Bus returns the Runtime's event bus. An all-replica runnable publishes the state it
// computes there and caches it in a leadership.StateReplayer registered with
// AddReplayer; a leader-only function (AddLeaderOnly) subscribes with
// busevents.Subscribe[T](ctx, rt.Bus(), name, n) under the ctx it is given (which makes
// the subscription leader-only, and closes its channel when the term ends), then calls
// Subscribed(ctx), and receives the cached state at once when its term starts, never
// older than what it already holds.
//
// # Crash failover
//
// In a pod, a follower takes the Lease at once when the kubelet reports the leader's
// container terminated, instead of waiting LeaseDuration out (the death signal,
// pkg/k8s/incarnation). Give the container the environment variables POD_NAMESPACE,
// POD_NAME, POD_UID (Downward API fieldRefs metadata.namespace, metadata.name,
// metadata.uid) and CONTAINER_NAME (its own name), and the service account list and
// watch on pods in the Lease's namespace; keep terminationMessagePath at its default
// (or set Options.TerminationMessagePath to it) and let nothing overwrite that file.
// Outside a pod it is off; Options.DeathSignal false turns it off in one.
//
// # Health and metrics
//
// New adds the /healthz check HealthzCheckName (fails while the replica believes it
// leads but missed its renew deadline, or a component failed) and the /readyz check
// ReadyzCheckName (fails until the informers are warm), and registers, on
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
// # Sharded controllers
//
// AddShardedController spreads one controller's objects over the replicas instead of
// giving them all to the leader: every replica runs it and a pkg/k8s/sharding Sharder,
// and reconciles only the objects whose UID falls in a shard it leads (sharded.go).
//
//   - Requests: events of objects of shards led elsewhere are not enqueued; a request
//     whose shard is not led here when a worker takes it is dropped (ShardedStats.Dropped),
//     since the shard's owner reconciles it.
//   - Context: Reconcile runs under the shard's term context: ShardTermFromContext
//     (pkg/k8s/sharding) gives the shard and its term, termctx.FromContext the same term,
//     and the context ends when the shard's term does.
//   - Fencing: the fenced client works unchanged, with the shard's term: it refuses
//     writes once the shard's term ended and stamps TermAnnotation with the shard's
//     term, and it reads the shard's Lease (never the single leader's) before it
//     overwrites a stamp of no term. Terms count per shard, so a stamp only compares
//     with terms of the same shard: write through it only the reconciled object, or
//     objects only that shard writes (named after it), never objects another shard's
//     reconciles also write. With Options.ServerSideFence the writes also carry the
//     shard Lease's name and token, and the ring's policy (NewShardedAdmissionFence)
//     makes the API server refuse a stale shard write in flight (# The API server's
//     fence).
//   - Hand-over: when a replica acquires a shard it enqueues every object of that shard
//     in its cache at once; when a shard's term ends it waits for the reconciles still
//     running under it before the shard's Lease is handed on, so one shard is never
//     reconciled by two replicas at once on a graceful move.
//   - Cache: by default every replica caches every object of the type (the manager's
//     cache) and filters on the client. With CacheOwnShards, where the API server
//     serves sharded list and watch (it is asked once at start, ServerSharding, and the
//     answer logged), a replica instead runs one informer per shard it leads, filtered
//     by the shard's selector, from the shard's acquisition to the end of its term: it
//     holds only its shards' objects, and the informer's first list is the shard's
//     baton. The Reconciler reads For's objects through Sharded.Reader then. A shard
//     acquired costs one list of that shard's objects (the manager's cache is warm
//     already); where the server does not serve it, the manager's cache is used.
//   - Shard work: ShardWork runs leader-only work per shard (sharding.Workers), under
//     the shard's term context from the acquisition to the end of the term, waited for
//     before the shard is handed on; a leadership.ShardedReplayer, filled on every
//     replica, hands it the shard's state at once (shardwork.go).
//
// A Runtime with only sharded controllers needs no Lease of its own: leave
// Options.LeaderElectionID empty and it runs no single-leader election (IsLeader is
// false, Term 0), while AddController, AddLeaderOnly and AddReplayer refuse with an
// error naming the field. With LeaderElectionID set, the single-leader election runs
// beside the rings, whether or not leader-only work is registered.
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
