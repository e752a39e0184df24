// Package configpublisher is the leader-only ConfigPublisher: it writes the
// published object (a ConfigMap in cluster mode, an in-memory object in
// embedded mode, both behind package store) with the current configuration,
// the pods it was published for, and the term of the leader that wrote it.
//
// # Usage
//
//	cm, _ := store.NewConfigMap(clientset, "baton", "baton-published")
//	pub, _ := configpublisher.New(bus, configpublisher.Options{Store: cm, Identity: podName})
//	m.AddLeaderOnly(pub)
//
// # What a term does
//
// Start resets the per-term state, subscribes with busevents.Subscribe[T]
// under the term's context (leader-only because the Manager runs it as
// leader-only) to ConfigValidatedEvent, ConfigInvalidEvent, HAProxyPodsDiscoveredEvent,
// TemplateRenderedEvent and ValidationFailedEvent (all LatestValue; renders
// and their failures of another term are ignored), signals
// lifecycle.Subscribed, and then folds each event
// into what it holds, reporting lifecycle.HoldsState for configuration and
// pods (its RequiredState). Whenever what the object should say changes it
// writes it once, after draining the events already queued. Start returns
// nil when the term's context ends.
//
// # The object
//
// Data is what the Content builds: RawContent writes config.yaml and
// pods.yaml from the validated configuration and the pods; RenderedContent
// writes haproxy.cfg, the newest valid output of the term's render-validate
// pipeline (pkg/controller/reconciler.Coordinator), with the versions it was
// rendered from.
// Annotations record the term (AnnotationTerm), the inputs' versions
// (AnnotationConfigVersion, AnnotationPodGeneration), the status
// (AnnotationStatus: valid or invalid) and, when invalid, the reasons
// (AnnotationReasons, a JSON array) and the refused version. An invalid
// configuration is a status-only write: the content of the last valid one
// stays. So is, with RenderedContent, a render that failed validation: its
// errors become the reasons and the last valid render stays. Decode reads
// the annotations back.
//
// The status in force is decided by arrival order, with one guard: an
// event older, by timestamp, than the one of the other type already held is
// history, as when a replay races a newer live outcome.
//
// # Fencing
//
// Write is the one write path, exported so that tests and tools can attempt
// a write with an explicit term. It reads the object, refuses with
// ErrStaleTerm when the object records a greater term, and writes with a
// compare-and-swap on the resourceVersion it read, reading again on
// conflict. A leader that loses the race to a newer leader therefore reads
// the newer term and is refused; it cannot overwrite it. A Component whose
// write was refused is fenced for the rest of its term: it writes nothing
// more, says so in State and the log, and waits for the runtime to end the
// term. Other write failures are retried after RetryInterval, with the
// newest state.
//
// The stamp, the check and ErrStaleTerm are pkg/fence's, the one fencing
// implementation every writer of Baton uses. With Options.LeaseToken every write
// of a term also carries the Lease's token of the term and the fence's label
// (fence.Stamps.WithLease), so the API server's fence of deploy/admission-fence.yaml
// refuses a write of the term that arrives after the Lease passed on, which the
// compare-and-swap alone lets through when no newer term wrote the object yet
// (the first Create above all). cmd/baton's replica (pkg/controller/app) sets it.
//
// A stamp of no term: with Options.HoldsLease, a write that finds a greater
// term on the object reads the Lease once, and if this replica still holds
// it in its term (so no term of this Lease wrote that stamp: an object
// restored from another cluster, or written by another program), it replaces
// the stamp under the same compare-and-swap and logs a WARN naming the
// object (WriteHolding). Without it, such an object fences every leader
// until the Lease's terms pass the stamp.
//
// The object Write reads is read-only (the store may share its maps, see
// store.Object): Write copies the maps that change, the annotations for a
// new term, and passes the others on as they are, so that a new term's
// write of unchanged content copies neither the data nor the labels. The
// data written is a copy of the record's, never the record's own map.
//
// # Choosing the content
//
// Content is the seam between what the publisher holds and what it writes.
// The fencing, the status handling and the term stamping are the same for
// every Content. Build is given the Payload it last returned
// (Inputs.Previous) and may return it again for unchanged content, as
// RenderedContent does: a new term renders again (from the render cache)
// and publishes the same output without building a new Payload. A new
// leader publishing RenderedContent writes nothing
// until its own Coordinator rendered (renders are not replayed); it writes
// the status at once if the replayed configuration is invalid.
//
// # Concurrency properties
//
// Start runs on the runtime's goroutine for the term and starts no other
// goroutine; it uses one timer for retries, stopped when it returns. A
// second Start while one runs returns ErrAlreadyRunning. State and
// RequiredState are safe for concurrent use. Write is safe for concurrent
// use; concurrent writers are serialised by the store's compare-and-swap.
//
// The package hands out no channels. Its bus subscription ends with the
// term's context, when the term ends (the Manager's scope reuses its
// record in the next term), and when the bus stops.
package configpublisher
