// Package leaderelection elects one leader among candidates through a
// coordination.k8s.io/v1 Lease, with the Lease protocol of client-go's
// tools/leaderelection, so Baton electors and stock client-go electors can share a
// Lease and never both lead. It knows nothing of an event bus; the adapter that turns
// its callbacks into events lives elsewhere.
//
// Less formally: at most one candidate believes it leads at any moment, as long as
// clocks tick at about the same rate (see # Clocks) and nobody but the candidates
// writes the Lease; each leadership gets a number (its term) larger than every earlier
// one, to stamp writes with; a crashed leader is replaced a LeaseDuration after its
// last renew, a leader that stops or hands over is replaced within milliseconds.
//
// # Usage
//
// Build an Elector with New (Kubernetes, client-go typed client) or NewWithStore (any
// LeaseStore, e.g. a MemoryStore for a single process), then call Start, which blocks
// until its context ends. Leader work goes in Callbacks.OnStartedLeading and runs under
// the term context; IsLeader, Term and GetLeader answer at any time.
//
// # Configuration
//
// The zero Config (with Identity, LeaseName, LeaseNamespace and a clientset or store)
// runs an election with the defaults 15s/10s/2s. Running without one must be asked
// for with Config.SingleReplica, which refuses every election field. Durations are
// bounded, each error naming its field: LeaseDuration in whole seconds (the Lease
// stores seconds) from 1s to 1h, RetryPeriod at least 100ms, LeaseDuration >
// RenewDeadline > 1.2 × RetryPeriod.
//
// # Protocol
//
// The lease fields are client-go's: holderIdentity, leaseDurationSeconds, acquireTime,
// renewTime, leaseTransitions, plus the coordinated leader election fields strategy and
// preferredHolder (KEP-4355), which are kept. A candidate takes the lease when it is
// absent, released (holder ""), or not renewed in time (see Expiry); leaseTransitions
// grows when the holder changes. Every write is a compare-and-swap on the
// resourceVersion. The leader renews every RetryPeriod; if it has not renewed
// successfully for RenewDeadline (counted from the send time of its last successful
// renew), its term ends. Releasing (Config.ReleaseOnCancel, HandOver) writes holder "",
// leaseDurationSeconds 1 and both times, as client-go does.
//
// Every Baton write also sets the annotation leaderelection.baton.dev/marker (see
// LeaseRecord.Marker): "holder:<identity>" on an acquire or renew, "release:<transitions>:
// <identity>" on a release. Other writers keep annotations as they find them, so the
// marker tells a Baton holder from any other, and a Baton release from a foreign clear
// (client-go's release of a lease it lost without noticing keeps the Baton holder's
// marker). A leader recognises any of its writes of the term, also one whose answer was
// lost, by its fields.
//
// # Expiry
//
// Followers judge expiry by their own monotonic clock from the moment they saw the
// lease's fields last change, never by the remote renewTime, so clock offsets between
// nodes do not matter. A Baton holder's lease is taken leaseDurationSeconds after that
// moment: its term ended by its RenewDeadline after its last renew, which came before
// the follower saw it; LeaseDuration − RenewDeadline is the margin for clock rate skew.
// Any other holder (client-go's elector, a hand-written holder) is given three times its
// leaseDurationSeconds: client-go's leader keeps its leader context for up to
// RetryPeriod + RenewDeadline after its last renew, and with ReleaseOnCancel another
// RenewDeadline while it tries to release, which its validation keeps below 2.84 ×
// LeaseDuration. The wait for an unknown holder is the longer of the last holder's
// lease duration and the configured one, three times that if the last holder seen was
// not Baton's.
//
// A state seen again after the watch was down for longer than a RetryPeriod restarts the
// wait even if unchanged, and a candidate takes back a record of its own at once only
// if it wrote it within the last RenewDeadline: after an etcd restore the same version
// may name a state that others replaced meanwhile.
//
// # Releases, deletes and cold starts
//
// A Baton release is taken at once (by the candidate it names as preferredHolder, if
// any), unless it is what a candidate sees on its first look (at start, or after its
// watch was down for long): that may be a restored copy of an old release, so it is
// waited out as an unknown holder. A holder cleared by anyone else is waited out as an
// unknown holder from when the clear was seen, except by its own last holder, whose
// term is over. A Lease deleted
// while a candidate watches (the delete carries its last state) is waited out as that
// state's holder from when the delete was seen; a candidate that finds the Lease gone
// after having seen it, without its last state (a re-list), waits as for an unknown
// holder from then, and so does a candidate that finds it absent again after a gap in
// its watch, or after a failed attempt to create it (it may have been created and
// deleted meanwhile). The holder that sees its own lease deleted re-creates it at once.
//
// A cold start, a candidate that has never seen the Lease and finds it absent, creates
// it at once, as client-go does: no store tells a Lease that never existed from one
// deleted by hand. That leaves one window: deleting the Lease of a running election by
// hand while its holder is cut off from the API server (or still waiting for the
// answer to its acquiring write), and starting a candidate before that holder's
// RenewDeadline has passed, gives two leaders until it has; the new term is the higher,
// so writes fenced by term refuse the old one's once the new one wrote. Do not delete
// the Lease of a running election; move leadership with HandOver or preferredHolder.
//
// Writes follow what the watch has delivered, not only what the loop has read: before
// an acquiring write the elector reads every event waiting on the watch and judges the
// latest state, and an acquiring write starts a term only if the Lease has not moved
// past it: before starting it, the elector reads what its watch delivered while the
// write was under way, and if that shows a later state (the Lease deleted, or written by
// another candidate), it follows that state instead. A term is never started on an
// answer the watch has already contradicted.
//
// # Slow acquiring writes
//
// An acquiring Update is a compare-and-swap on the state the candidate judged, so it
// lands on that state or not at all. A Create lands on any absent Lease, also one that
// was created since the candidate saw it absent, led by another candidate, and deleted
// by hand, all unseen; that holder may lead for up to a RenewDeadline after its last
// renew, which came before the delete. The candidate's watch vouches for the states in
// between only while its answer comes soon. So a Create does not start its term at
// once when its answer came more than a RetryPeriod after its send (by the elector's
// clock: a pause of the process between the two is part of the round trip), or
// when the watch showed a state of the Lease between the absence the Create was sent on
// and the Create's own. The candidate then holds the Lease without leading: it renews
// it every RetryPeriod, so it stays its own and the others follow it, and starts the
// term a LeaseDuration after the answer (the unseen holder's RenewDeadline, plus the
// margin for clock rates that every follower's wait has). A renew that fails, or a
// state of the Lease that is not its own, gives the held term up, and the candidate
// acquires again no earlier than that instant. Stats.SlowAcquires counts these
// Creates; IsLeader is false and GetLeader names the candidate meanwhile.
//
// A Create answered within a RetryPeriod starts its term only once the watch that was
// open when it was sent has delivered the Create's own event with no state of the
// Lease between the absence it was sent on and it: the answer alone proves only that
// the Lease was absent when the Create landed. On a real API server the answer often
// comes a moment before the event; the candidate holds the Lease until the event (a
// few milliseconds), or as for a slow Create (a LeaseDuration) when no watch was open
// at the send, or it broke or stayed silent. An acquiring Update starts its term at
// once, so a hand-over takes one watch event. A
// store whose watch skips states (a MemoryStore whose reader is slow) could hide a
// holder created and deleted by hand during the Create: such a store marks the first
// event after a skip (LeaseEvent.Gap), and a watch that skipped states before the
// Create's own event does not vouch for it (the Create is held as a slow one). The
// Kubernetes watch delivers every event.
//
// # History going back
//
// An etcd restore or a stale API server can move resourceVersions back. A current state
// (a watch's list, a read, a write's answer) below the highest resourceVersion seen
// ends a running term, forgets the writes this elector remembers, and waits as for an
// unknown holder; Stats.VersionResets counts it. Terms stay above every version seen
// before: an acquisition below them renews (within half a RenewDeadline) until its
// resourceVersion is above, and releases otherwise. A candidate that did not see the
// later versions (cut off during them) cannot know them: its next term may repeat the
// number of a term it never saw, so fencing on terms alone does not span a restore.
// Together with a Lease deleted by hand while its holder is cut off, a candidate that
// never saw the Lease (a cold start after the restore) can then lead beside that holder
// under a lower term that fencing does not refuse (test/chaos, seed 11263). Restore etcd
// so that revisions move forward (etcdutl snapshot restore with --bump-revision and
// --mark-compacted): versions then never go back, terms stay above every earlier term,
// and neither limit applies.
// Watch errors (410 Gone) are logged, counted (Stats.WatchErrors) and followed by a
// re-list.
//
// # Death signal
//
// A holder with Config.Incarnation writes it to the lease on every acquire and renew
// (annotation leaderelection.baton.dev/incarnation, bound to the write by its
// acquireTime and renewTime, so that an elector that keeps annotations as it finds them
// and writes next does not inherit it: client-go keeps the acquireTime when the holder
// already has its identity, so a restarted container of the same identity running
// client-go renews with the dead incarnation's acquireTime and annotations; a release
// clears it). A follower
// with Config.DeathWatch watches the incarnation of a Baton holder other than its own,
// and once the watch proves it over takes the lease at once, by a compare-and-swap on
// the state it saw, instead of waiting the lease out. Only the state observed when the
// proof arrived is taken so: a dead process cannot write, so a Lease seen written again
// (a new resourceVersion) after the proof is judged by the lease rules (a renew the
// dead process had in flight costs the takeover its speed, never its safety). A
// state seen on a first look (see
// # Releases, deletes and cold starts), a state first seen on a list, a read or a
// write's answer rather than in a watch event (after an etcd restore a list can bring
// the dead holder's state back while a later holder, whose acquisition the restore
// erased, still leads), a foreign holder, and a record whose incarnation changed since
// are waited out as usual. Without a proof nothing changes. Stats.DeathTakeovers
// counts the terms started this way. pkg/k8s/incarnation says which kubelet reports
// are proof, and why.
//
// OnHolderDead (Callbacks) tells the application whose death was proven, e.g. so that
// it stops counting that replica as a member (package sharding does).
//
// # Following only
//
// An elector with Config.FollowOnly, or after SetCampaigning(false), follows the lease
// without campaigning: it watches, judges and reports the holder (and its death) as
// above, but makes no acquiring write, except to take a lease handed over to it. Once
// SetCampaigning(true), it acquires as soon as the state it followed allows: following
// counts as looking, so a release or an absence it has watched since its first look,
// or a holder that expired or was proven dead meanwhile, is taken at once. The
// first-look rules are not lifted: a state first seen on a first look (at start, or
// after a gap in the watch) is waited out from that look, whether the elector was
// allowed to campaign then or only later. Package sharding runs its shard electors so,
// letting each campaign only for the shards placed on its replica.
//
// # Hand-over
//
// Elector.HandOver(ctx, identity) ends the term, waits for its OnStartedLeading to
// return, and releases naming identity as preferredHolder; that candidate takes the
// lease on the release's watch event (a few milliseconds on a real API server), the
// others wait a LeaseDuration for it. A leader that sees another candidate named as its
// lease's preferredHolder (e.g. by Kubernetes' coordinated leader election) hands over
// the same way. An acquisition clears preferredHolder. The preferred holder is also
// kept in the annotation leaderelection.baton.dev/preferred-holder, since API servers
// without the CoordinatedLeaderElection feature drop spec.preferredHolder.
//
// # Mixed with client-go
//
// Baton and client-go electors may share a Lease (during a migration) without two
// leaders: Baton waits out client-go holders and clears as above. client-go's followers
// see a renew only when renewTime's whole second changes, so with them on the Lease use
// LeaseDuration − RenewDeadline ≥ 1s (the defaults have 5s). client-go's followers take
// a cleared lease at once; a Baton leader whose lease a client-go elector cleared ends
// its term on the watch event, which client-go's next poll normally comes after.
//
// # Watching
//
// Unlike client-go's followers, which poll, followers here watch the lease
// (LeaseStore.Watch). A released lease is taken on the watch event; a crashed leader's
// lease is taken by a timer; a follower sends no requests at all while the holder keeps
// renewing. When the watch breaks it is opened again (which re-lists) after a jittered
// backoff; an open that takes RenewDeadline is abandoned and retried, and a watch that
// stays silent for a RetryPeriod after a write conflicted is replaced, so a stalled
// connection cannot blind a follower. Abandoned watches are drained until the store
// closes them, and Start waits for that.
//
// # Terms
//
// Each acquisition is a term, numbered by the resourceVersion of the acquiring write (or
// of the renew that moved it above earlier terms after the history went back).
// resourceVersions of one resource are comparable (Kubernetes 1.35, KEP-5504), so terms
// are strictly increasing over all acquisitions of the lease, also after it was deleted
// and re-created, and serve as fencing tokens. termctx.FromContext reads the term from
// the term context; Elector.Term gives the current one. An elector refuses (and releases) an
// acquisition whose resourceVersion is not a number above its previous term.
//
// The term context ends when the term does: on step-down, on shutdown, and by its own
// clock check: its Err and Done report the term over as soon as RenewDeadline has
// passed since the last successful renew, even before any goroutine ran to cancel it,
// so a process resumed after SIGSTOP sees at once that it no longer leads.
// context.Cause gives ErrRenewDeadlineMissed, ErrLeaseLost, ErrHandedOver or the cause
// of Start's context. Contexts derived from it end when the elector's timer cancels it,
// which runs as soon as the process does, or at once when termctx.FromContext (or any
// Value lookup) is called on them past the deadline: leader work that reads its term
// before acting never acts on a term that is over. The acquiring write carries no term
// (IsLeader is false while it is under way) and is abandoned a RenewDeadline after its
// send.
//
// Losing the lease ends the term, not the elector: it follows again and campaigns for a
// new term in place, once the previous term's OnStartedLeading has returned.
//
// # Concurrency properties
//
// One election goroutine (the caller of Start) does all store reads and writes and runs
// OnStoppedLeading and OnHolderDead; each LeaseStore.Watch call runs in a goroutine of its own (so a hung
// List cannot stall renews), each term's OnStartedLeading runs in a goroutine of its
// own (one term's call returns before the next term starts), and OnNewLeader calls
// come in order from one notifier goroutine. Start waits for all of them, and for abandoned watches to close, before it returns. OnStoppedLeading
// runs exactly once per started term, after the term context was cancelled, also when
// the election goroutine panics. Terms of one elector never overlap. IsLeader, Term,
// GetLeader, Healthy, Stats, HandOver, SetCampaigning, Synced and Identity are safe to
// call from any goroutine.
// No lock is held while calling a callback or the store.
//
// # Clocks
//
// Every time read and timer of an elector goes through Config.Clock (nil: the real
// clock). The elector only subtracts its own readings, never compares them with times
// from elsewhere, so clocks of different nodes need not agree on the time, and a step of
// the wall clock changes nothing (the real clock's readings are monotonic). They must
// agree on the rate, within a tolerance:
//
//   - A leader's term ends RenewDeadline by its clock after the send time of the last
//     write of its own that it knows went through (its reply, or a re-read that shows
//     it when the reply was lost). A follower takes the lease LeaseDuration (the
//     holder's leaseDurationSeconds) by its clock after it first saw that write, which
//     is after it was sent; any later write would make the follower's compare-and-swap
//     fail.
//   - So no two candidates lead at once while the follower's clock runs at most
//     LeaseDuration/RenewDeadline times as fast as the leader's. Config.ClockTolerance
//     states it per clock: safe while every clock's rate lies within [1−ε, 1+ε] of the
//     true rate, ε = (LeaseDuration − RenewDeadline)/(LeaseDuration + RenewDeadline),
//     0.2 with the defaults 15s/10s and with 3s/2s.
//   - The term context ends at that deadline by its own timer and by the lazy check of
//     Err, Done and Value. Leader work that acts after its term ended without looking
//     (a process stalled between its check and its act) is outside the bound: use the
//     term as a fencing token.
//
// Beyond the tolerance two leaders are possible, and test/chaos shows them. Within it,
// test/chaos injects rates across the whole range (1−ε to 1+ε per candidate, changing
// over time) in every CI run; TestClockTolerance checks the edge (0.95ε: the follower
// starts after the leader ended; 1.05ε: their terms overlap).
//
// Config.JitterSource replaces the random source of the retry jitter, and the
// election goroutine takes inputs that are ready together in a fixed order, so an
// elector on a fake Clock with a seeded source takes the same path on every run (the
// fault tests replay a seed exactly).
//
// # Values from the cluster
//
// Anyone with update rights on the Lease can write any value into it. Every value the
// elector reads is bounded by what Baton itself writes: a leaseDurationSeconds above
// MaxLeaseDuration (1h) is taken as 1h, so a holder that is not Baton's is waited out
// at most 3h after its last change and a Baton one at most 1h (a client-go elector
// sharing the Lease must use at most 1h); a negative duration (from a custom
// LeaseStore) is taken as the configured one; leaseTransitions is written at least 0
// and stays at the int32 maximum instead of wrapping to a negative number, which the
// API server refuses. Each out-of-range value is logged at WARN once per record and
// counted in Stats.OutOfRange. The term comes from the resourceVersion, which only the
// API server writes.
//
// # Who controls leadership
//
// Whoever may update the Lease controls leadership: a write can name any holder, clear
// it, or delete it, and the candidates follow; bounded values (above) only limit how
// long a bad record can delay an election. Grant update and delete on the
// Lease, by resourceNames, to the candidates' service account only, and give no other
// workload in the namespace a Role with update, patch or delete on
// coordination.k8s.io leases (nor a wildcard over resources or verbs). create cannot be
// limited by name in Kubernetes RBAC; a workload that may create leases can create this
// one only while it is absent. deploy/rbac.yaml is such a Role.
//
// With the death signal on (Config.DeathWatch with package incarnation's Watcher),
// whoever may write the holder's pod status controls leadership too: the nonce a
// proof needs is in the Lease annotation, readable by all, so a pods/status update
// carrying it makes the followers take the Lease from a live holder at once. Trust
// pods/status writers in the namespace as Lease writers (see package incarnation,
// "Who can prove a death"), or leave the death signal off.
//
// # Testing
//
// MemoryStore has the compare-and-swap and watch semantics of the Kubernetes store and
// runs in testing/synctest bubbles, where all timing here (expiry, renew deadline,
// backoff) runs on the fake clock. Package leaderelectiontest writes, deletes and
// restores a MemoryStore's Lease by hand and fails its watches.
package leaderelection
