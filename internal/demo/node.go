package demo

import (
	"context"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	podinc "github.com/baton-dev/baton/pkg/k8s/incarnation"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// observerBuffer is the buffer of each replica's observer subscription; it
// is Critical, and a drop fails the run's checks.
const observerBuffer = 1024

// node is one incarnation of one replica.
type node struct {
	id  string
	inc *incarnation
	// pod is the node's incarnation of its pod's container, recorded in
	// the lease while it leads; the kubelet reports it terminated.
	pod  podinc.Incarnation
	r    *app.Replica
	gate *gate
	// stall is the node's leader-only component of the hang fault.
	stall *stall

	cancel context.CancelFunc
	wg     sync.WaitGroup // Run and the observer

	// mu guards the fields below.
	mu      sync.Mutex
	stopped bool // cancelled by the run (killed or released)
	killed  bool
	runErr  error
}

// startNode builds and starts incarnation n of replica id.
func (e *engine) startNode(id string, n int) (*node, error) {
	nd := &node{id: id, gate: &gate{}, stall: newStall(), inc: &incarnation{replica: id, n: n, writes: map[string]time.Time{}},
		pod: e.kubelet.incarnation(id)}
	rec := e.rec
	o := e.world.e.Options(id)
	o.Election.LeaseDuration = e.opts.LeaseDuration
	o.Election.RenewDeadline = e.opts.RenewDeadline
	o.Election.RetryPeriod = e.opts.RetryPeriod
	o.Election.Incarnation = nd.pod.String()
	o.Election.DeathWatch = e.kubelet
	o.LeaseStore = &gatedLeases{inner: o.LeaseStore, gate: nd.gate, identity: id,
		onWrite: func(rv string, sent time.Time) { rec.wrote(nd.inc, rv, sent) }}
	o.Published = &gatedStore{inner: o.Published, gate: nd.gate}
	o.StopTimeout = 2 * time.Second
	o.StepDownGrace = e.opts.stepDownGrace()
	o.LeaderOnly = func(*app.Replica) ([]lifecycle.Component, error) { return []lifecycle.Component{nd.stall}, nil }
	o.PublisherRetry = e.opts.RetryPeriod
	o.Scheduler.MinInterval = e.opts.RetryPeriod
	o.Logger = e.opts.Logger
	o.Hooks = app.Hooks{
		OnStartedLeading: func(ctx context.Context) { rec.startedLeading(nd.inc, ctx) },
		OnStoppedLeading: func() { rec.stoppedLeading(nd.inc) },
		OnTakeover:       func(prev, acquired k8sle.LeaseRecord) { rec.takeover(nd.inc, prev, acquired) },
		OnReplay: func(name string, ok bool) {
			rec.replayed(nd.inc, nd.r.Manager().Status().Term, name, ok)
		},
		OnTermReady: func(rep lifecycle.TermReport) { rec.termReady(nd.inc, rep) },
		OnPublish:   func(rep configpublisher.WriteReport) { rec.published(nd.inc, rep) },
	}
	r, err := app.New(o)
	if err != nil {
		return nil, err
	}
	nd.r = r
	e.kubelet.started(nd.pod)
	// Until Run stops the bus, which closes ch.
	ch := busevents.Subscribe[busevents.Event](context.Background(), r.Bus(), "demo-observer", observerBuffer,
		busevents.Types(observed[0], observed[1:]...), busevents.Critical(func(busevents.Drop) { rec.drop() }))
	ctx, cancel := context.WithCancel(e.ctx)
	nd.cancel = cancel
	nd.wg.Go(func() {
		err := r.Run(ctx)
		nd.mu.Lock()
		nd.runErr = err
		nd.mu.Unlock()
	})
	nd.wg.Go(func() {
		for ev := range ch { // closed when Run stops the bus
			rec.observe(nd.inc, ev)
		}
	})
	if e.opts.Metrics != nil {
		e.opts.Metrics.Set(id, r.Handler())
	}
	return nd, nil
}

// kill crashes the node: its stores fail from now on, so it can neither
// renew nor release, and it is cancelled. It returns once it stopped.
func (n *node) kill() {
	n.stall.unblock()
	n.mu.Lock()
	n.stopped, n.killed = true, true
	n.mu.Unlock()
	n.inc.killed.Store(true)
	n.gate.kill()
	n.cancel()
	n.wg.Wait()
}

// release shuts the node down gracefully: it releases the lease.
func (n *node) release() {
	n.stall.unblock()
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

// stop ends a node at the end of the run, resuming it first if paused and
// unblocking its stall component if it hangs.
func (n *node) stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.gate.resume()
	n.stall.unblock()
	n.cancel()
	n.wg.Wait()
}

// state names what the node is doing, for the live view.
func (n *node) state() string {
	n.mu.Lock()
	stopped, killed := n.stopped, n.killed
	n.mu.Unlock()
	switch {
	case killed:
		return "killed"
	case stopped:
		return "stopped"
	case n.gate.isPaused():
		return "paused"
	case n.r.Elector().Elector().IsLeader():
		return "leader"
	case n.r.Ready() != nil:
		return "starting"
	}
	return "follower"
}

// live reports whether the node runs and is not paused.
func (n *node) live() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.stopped && !n.gate.isPaused()
}

// leading reports the node's term if it leads with its term ready.
func (n *node) leading() (uint64, bool) {
	if !n.live() || !n.r.Elector().Elector().IsLeader() {
		return 0, false
	}
	st := n.r.Manager().Status()
	return st.Term, st.Leading && st.TermReady && st.Term == n.r.Elector().Elector().Term()
}

func (n *node) wasKilled() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.killed
}

func (n *node) err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runErr
}
