// Package deploymentscheduler is the leader-only DeploymentScheduler: once
// it holds both a valid configuration and the discovered pods, it deploys
// the configuration to the pods, rate limited, and forgets what was pending
// when leadership ends.
//
// # Usage
//
//	sched, _ := deploymentscheduler.New(bus, deploymentscheduler.Options{MinInterval: 2 * time.Second})
//	m.AddLeaderOnly(sched)
//
// # What a term does
//
// Start resets the per-term state (the limiter, what was deployed, what is
// pending), subscribes with busevents.Subscribe[T] under the term's context
// (leader-only because the Manager runs it as leader-only) to
// ConfigValidatedEvent and HAProxyPodsDiscoveredEvent (LatestValue) and
// LostLeadershipEvent, signals
// lifecycle.Subscribed, and reports lifecycle.HoldsState for each state
// type as it arrives (its RequiredState lists both). The replays of the term
// start it: a new leader deploys the current state at once, since it cannot
// know whether its predecessor's last deployment completed.
//
// # Rate limit and coalescing
//
// Two deployments of a term start at least MinInterval apart. Changes that
// arrive while the limit holds the next one back are coalesced: one
// deployment, of the newest configuration and pods, covers them all (its
// Coalesced counts them). A change back to exactly what is deployed cancels
// the pending deployment. A failed deployment (Options.Deploy returned an
// error) stays pending and is tried again after MinInterval, with the newest
// state.
//
// # Cleanup
//
// On LostLeadershipEvent the pending deployment is dropped and its timer
// stopped at once, before the runtime even cancels the term, and nothing
// more is deployed in the term; the same happens when the term's context
// ends. State.Cleared counts the pending deployments dropped so.
//
// # Events
//
// Each deployment is published as events.DeploymentScheduledEvent (never
// replayed: it is history, not state) and kept in History, which spans
// terms.
//
// # Concurrency properties
//
// Start runs on the runtime's goroutine for the term and starts no other
// goroutine; its one timer is stopped before it returns. Options.Deploy runs
// on that goroutine. A second Start while one runs returns
// ErrAlreadyRunning. State, History and RequiredState are safe for
// concurrent use.
//
// The package hands out no channels. Its bus subscription ends with the
// term's context, when the term ends (the Manager's scope reuses its
// record in the next term), and when the bus stops.
package deploymentscheduler
