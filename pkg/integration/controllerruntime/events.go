package controllerruntime

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Reasons of the Events the Runtime records on its Lease, one for each change of
// hands this replica makes, with why. kubectl describe lease <name> lists them.
const (
	// EventAcquired: this replica took the Lease (free, released by its holder, or
	// expired); Normal.
	EventAcquired = "LeaderElected"
	// EventDeathTakeover: this replica took the Lease at once from a holder whose
	// container the kubelet reported terminated (the death signal); Warning.
	EventDeathTakeover = "LeaderDeathTakeover"
	// EventReleased: this replica released the Lease on a graceful stop; Normal.
	EventReleased = "LeaderReleased"
	// EventHandedOver: this replica ended its term to hand the Lease to another;
	// Normal.
	EventHandedOver = "LeaderHandedOver"
	// EventLost: this replica's term ended without a release (it missed its renew
	// deadline, or stepped down): the Lease expires or was taken; Warning.
	EventLost = "LeaderLost"
)

// Reasons of the Events a sharded controller records on a shard Lease, with why (the
// counterparts of the single Lease's). A shard moves far more often than the single
// Lease, so each change of hands is one Event, by the replica that took the shard:
// a replica that hands a shard over records nothing (its successor's ShardAcquired
// says the Lease was handed to it), and records ShardReleased or ShardLost only for
// a term that ended without a successor named.
const (
	// EventShardAcquired: this replica took the shard's Lease (free, released by its
	// holder in a hand-over, or expired); Normal.
	EventShardAcquired = "ShardAcquired"
	// EventShardDeathTakeover: this replica took the shard's Lease at once from a
	// holder whose container the kubelet reported terminated; Warning.
	EventShardDeathTakeover = "ShardDeathTakeover"
	// EventShardReleased: this replica released the shard's Lease on a graceful stop;
	// Normal.
	EventShardReleased = "ShardReleased"
	// EventShardLost: this replica's term of the shard ended without a release (it
	// missed its deadline, or gave the shard up); Warning.
	EventShardLost = "ShardLost"
)

// eventReasons are the reasons of one kind of Lease's Events, in the order of
// leaseEvents' cases: acquired, death takeover, released, handed over (""
// records nothing: the successor's Event tells), lost.
type eventReasons struct{ acquired, death, released, handedOver, lost string }

var (
	leaderReasons = eventReasons{EventAcquired, EventDeathTakeover, EventReleased, EventHandedOver, EventLost}
	shardReasons  = eventReasons{EventShardAcquired, EventShardDeathTakeover, EventShardReleased, "", EventShardLost}
)

// eventRecorderName is the reporting controller of the Runtime's Events.
const eventRecorderName = "baton"

// eventLeaseReadTimeout bounds the read of the Lease's UID for an Event.
const eventLeaseReadTimeout = 5 * time.Second

// leaseEvents records the Events of one Lease's changes of hands on this replica,
// from the elector's callbacks.
type leaseEvents struct {
	// recorder returns the manager's recorder; it is asked at the first Event (the
	// manager starts its broadcaster then, and stops it when it stops). Unused with
	// pace.
	recorder        func() events.EventRecorder
	cs              kubernetes.Interface
	namespace, name string
	identity        string
	stats           func() k8sle.Stats
	stopping        func() bool // the manager is stopping: a term's end is a release
	release         bool        // Options.LeaderElectionReleaseOnCancel
	// reasons are the single Lease's (leaderReasons) or a shard's (shardReasons);
	// what names the role in the notes: "leader", or "owner of shard 3".
	reasons eventReasons
	what    string
	// pace, when set, queues an Event's recording to be done later (a shard Lease's:
	// eventPacer), written directly; without it, each is recorded at once with the
	// recorder, on a goroutine of its own.
	pace func(record func())

	// wg counts the Events being recorded; the Runtime's Start waits for them.
	wg sync.WaitGroup

	// mu guards the counters as of the last Event, to tell why a term began or ended,
	// and the Lease's UID: the one each term's acquisition found (termctx.Term.LeaseUID),
	// else read once at the first Event that needs it.
	mu                           sync.Mutex
	deaths, handOvers, handedOff uint64
	uid                          types.UID
}

// started records the Event of a term that began.
func (e *leaseEvents) started(ctx context.Context) {
	st := e.stats()
	t, _ := termctx.Get(ctx)
	term := t.Number
	e.mu.Lock()
	death := st.DeathTakeovers > e.deaths
	handedOff := st.HandedOffTerms > e.handedOff
	e.deaths, e.handedOff = st.DeathTakeovers, st.HandedOffTerms
	if t.LeaseUID != "" {
		e.uid = types.UID(t.LeaseUID) // the Lease as this term found it: no read
	}
	e.mu.Unlock()
	switch {
	case death:
		e.record(corev1.EventTypeWarning, e.reasons.death, "Acquire",
			"%s became %s in term %d at once: the kubelet reported the holder's container terminated", e.identity, e.what, term)
		return
	case handedOff:
		e.record(corev1.EventTypeNormal, e.reasons.acquired, "Acquire",
			"%s became %s in term %d: the previous holder handed the Lease to it", e.identity, e.what, term)
		return
	}
	e.record(corev1.EventTypeNormal, e.reasons.acquired, "Acquire",
		"%s became %s in term %d (the Lease was free, released or expired)", e.identity, e.what, term)
}

// stopped records the Event of a term that ended.
func (e *leaseEvents) stopped() {
	st := e.stats()
	e.mu.Lock()
	handOver := st.HandOvers > e.handOvers
	e.handOvers = st.HandOvers
	e.mu.Unlock()
	// The manager stops its recorder once its runnables returned, dropping what it
	// still holds: the Event of a stopping replica is written directly.
	stopping := e.stopping()
	switch {
	case handOver && e.reasons.handedOver == "":
		// The successor records the change of hands.
	case handOver && stopping:
		e.recordDirect(corev1.EventTypeNormal, e.reasons.handedOver, "Release",
			fmt.Sprintf("%s stopped being %s to hand the Lease over (graceful stop)", e.identity, e.what))
	case handOver:
		e.record(corev1.EventTypeNormal, e.reasons.handedOver, "Release", "%s stopped being %s to hand the Lease over", e.identity, e.what)
	case stopping && e.release:
		e.recordDirect(corev1.EventTypeNormal, e.reasons.released, "Release",
			fmt.Sprintf("%s stopped being %s and released the Lease (graceful stop)", e.identity, e.what))
	default:
		e.record(corev1.EventTypeWarning, e.reasons.lost, "Lose",
			"%s stopped being %s without a release (deadline missed, or gave it up); another replica takes the Lease once it expires", e.identity, e.what)
	}
}

// record records an Event on the Lease: through pace, written directly when its turn
// comes, or with the recorder on a goroutine of its own (the elector waits for its
// callbacks, and a release must not wait for a read of the Lease's UID).
func (e *leaseEvents) record(eventType, reason, action, note string, args ...any) {
	if e.pace != nil {
		note := fmt.Sprintf(note, args...)
		e.pace(func() { e.write(eventType, reason, action, note) })
		return
	}
	e.wg.Go(func() { e.recordNow(eventType, reason, action, note, args...) })
}

func (e *leaseEvents) recordNow(eventType, reason, action, note string, args ...any) {
	ctx, cancel := context.WithTimeout(context.Background(), eventLeaseReadTimeout)
	defer cancel()
	e.recorder().Eventf(e.lease(ctx), nil, eventType, reason, action, note, args...)
}

// lease returns the Lease as an Event's regarding object, with its UID when known:
// from the last term's start, else read at the first Event that can, and kept (an
// Event per move must not cost a read too).
func (e *leaseEvents) lease(ctx context.Context) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: e.name}}
	lease.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
	e.mu.Lock()
	lease.UID = e.uid
	e.mu.Unlock()
	if lease.UID != "" {
		return lease
	}
	if got, err := e.cs.CoordinationV1().Leases(e.namespace).Get(ctx, e.name, metav1.GetOptions{}); err == nil {
		lease.UID = got.UID
		e.mu.Lock()
		e.uid = got.UID
		e.mu.Unlock()
	}
	return lease
}

// recordDirect writes an Event as write does, on a goroutine of its own.
func (e *leaseEvents) recordDirect(eventType, reason, action, note string) {
	e.wg.Go(func() { e.write(eventType, reason, action, note) })
}

// write writes an Event as the recorder would (events.k8s.io/v1, reporting
// controller eventRecorderName), with the clientset, and returns once it was written
// or failed: the recorder sends each Event on a goroutine of its own, which a caller
// that paces them (eventPacer) cannot wait for.
func (e *leaseEvents) write(eventType, reason, action, note string) {
	ctx, cancel := context.WithTimeout(context.Background(), eventLeaseReadTimeout)
	defer cancel()
	lease := e.lease(ctx)
	host, _ := os.Hostname()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: fmt.Sprintf("%s.%x", e.name, time.Now().UnixNano())},
		EventTime:  metav1.NewMicroTime(time.Now()), Type: eventType, Reason: reason, Action: action, Note: note,
		ReportingController: eventRecorderName, ReportingInstance: eventRecorderName + "-" + host,
		Regarding: corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
			Namespace: e.namespace, Name: e.name, UID: lease.UID},
	}
	_, _ = e.cs.EventsV1().Events(e.namespace).Create(ctx, ev, metav1.CreateOptions{}) // best effort, as the recorder's
}
