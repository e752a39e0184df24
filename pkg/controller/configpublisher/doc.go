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
// Start resets the per-term state, subscribes with SubscribeLeaderOnly to
// ConfigValidatedEvent, ConfigInvalidEvent and HAProxyPodsDiscoveredEvent
// (all LatestValue), signals lifecycle.Subscribed, and then folds each event
// into what it holds, reporting lifecycle.HoldsState for configuration and
// pods (its RequiredState). Whenever what the object should say changes it
// writes it once, after draining the events already queued. Start returns
// nil when the term's context ends.
//
// # The object
//
// Data is what the Content builds (RawContent: config.yaml and pods.yaml).
// Annotations record the term (AnnotationTerm), the inputs' versions
// (AnnotationConfigVersion, AnnotationPodGeneration), the status
// (AnnotationStatus: valid or invalid) and, when invalid, the reasons
// (AnnotationReasons, a JSON array) and the refused version. An invalid
// configuration is a status-only write: the content of the last valid one
// stays. Decode reads the annotations back.
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
// # Later: publishing the rendered output
//
// Content is the seam for the render-validate pipeline: a Content that
// builds the payload from the pipeline's TemplateRenderedEvent, added to
// Inputs and to the subscription, publishes the rendered output instead of
// the raw configuration, with the same fencing and status handling.
//
// # Concurrency properties
//
// Start runs on the runtime's goroutine for the term and starts no other
// goroutine; it uses one timer for retries, stopped when it returns. A
// second Start while one runs returns ErrAlreadyRunning. State and
// RequiredState are safe for concurrent use. Write is safe for concurrent
// use; concurrent writers are serialised by the store's compare-and-swap.
package configpublisher
