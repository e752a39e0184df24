package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/baton-dev/baton/pkg/k8s/internal/kwatch"
)

// ErrGroupWatchBroke is the Err of the last event of a KubernetesLeaseGroup watch that
// ended because the group's shared watch broke (the caller watches again, which
// lists) or because the caller fell behind by more than groupQueue events.
var ErrGroupWatchBroke = errors.New("leaderelection: lease group watch broke")

// groupQueue bounds the events a KubernetesLeaseGroup keeps for one reader that has
// not taken them: past it, the reader's watch ends (it lists again) instead of the
// shared watch waiting for it.
const groupQueue = 256

// groupOpenTimeout bounds the opening of a group's shared watch (a black-holed List
// or Watch call): past it, the readers waiting for it fail and the next opens anew.
const groupOpenTimeout = DefaultRenewDeadline

// groupSilence is how long a group's shared watch may deliver nothing, not even a
// bookmark (the API server sends one about every minute), before it is taken as
// stuck and broken: its readers list again on a new one. A ring's member Leases are
// renewed every RetryPeriod, so its watch is never that quiet while it runs.
const groupSilence = 3 * time.Minute

// KubernetesLeaseGroup is a group of coordination.k8s.io/v1 Leases in one namespace
// that carry one label (key=value): the Leases of a sharded ring. Its stores
// (Store) read and write each Lease as NewKubernetesStore's do and label every
// Lease they write, but watch through one shared watch of the label (Watch), opened
// while any of them watches: a replica electing S Leases holds one watch, not S.
// Safe for concurrent use.
type KubernetesLeaseGroup struct {
	leases    coordinationv1client.LeaseInterface
	namespace string
	labels    map[string]string
	selector  string

	// mu guards subs, byName, shared, next and listFree.
	mu     sync.Mutex
	subs   map[*groupSub]struct{}            // the readers of the Leases an accept function takes
	byName map[string]map[*groupSub]struct{} // the readers of one Lease, by its name (a store's)
	shared *sharedWatch                      // the shared watch, nil while none runs
	// next is the list by label that the store watches asking for one now will share,
	// nil when none asked since the last began; listFree is closed when the list under
	// way returns, nil while none is (see listed).
	next     *listBatch
	listFree chan struct{}
}

// listBatch is one list of the group's Leases by label, shared by the store watches
// that asked for it before it began (listed).
type listBatch struct {
	done   chan struct{} // closed when the list returned
	leases map[string]*coordinationv1.Lease
	rv     string // the list's resourceVersion
	err    error
}

// errListAbandoned is the error of a shared list whose runner's context ended: the
// others waiting for it ask for the next.
var errListAbandoned = errors.New("leaderelection: shared lease list abandoned")

// GroupEvent is one event of a KubernetesLeaseGroup watch: a Lease added, changed or
// deleted (Lease is its state; for a delete, its last state, with the delete's
// resourceVersion), or, as the last event, Err.
type GroupEvent struct {
	Lease   *coordinationv1.Lease
	Deleted bool
	Err     error
}

// sharedWatch is the group's one watch of its label.
type sharedWatch struct {
	ready chan struct{} // closed once open, or once opening failed (err)
	err   error
	stop  context.CancelFunc
}

// NewKubernetesLeaseGroup returns the group of the Leases of namespace labelled
// key=value. It returns an error wrapping ErrInvalidConfig when clientset is nil or
// namespace, key or value is empty.
func NewKubernetesLeaseGroup(clientset kubernetes.Interface, namespace, key, value string) (*KubernetesLeaseGroup, error) {
	err := checkClient(clientset, namespace, key == "" || value == "",
		&ConfigError{Field: "label", Reason: fmt.Sprintf("label %q=%q has an empty part", key, value)})
	if err != nil {
		return nil, err
	}
	set := map[string]string{key: value}
	return &KubernetesLeaseGroup{
		leases:    clientset.CoordinationV1().Leases(namespace),
		namespace: namespace,
		labels:    set,
		selector:  labels.SelectorFromSet(set).String(),
		subs:      map[*groupSub]struct{}{},
		byName:    map[string]map[*groupSub]struct{}{},
	}, nil
}

// Store returns the LeaseStore of the group's Lease name: Get, Create and Update as
// NewKubernetesStore's (Create and Update set the group's label), Watch a list of
// the Lease followed by its events on the group's shared watch.
func (g *KubernetesLeaseGroup) Store(name string) LeaseStore {
	return &groupStore{
		kubernetesStore: &kubernetesStore{leases: g.leases, namespace: g.namespace, name: name,
			selector: fields.OneTermEqualSelector("metadata.name", name).String(), labels: g.labels},
		g: g,
	}
}

// Watch delivers the events of the group's Leases whose name accept takes, from the
// shared watch, once it is open (Watch returns then): a caller that needs their
// state lists it after Watch returned and skips the events at or below the list's
// resourceVersion. The channel is closed when ctx ends, or after an event with Err
// (wrapping ErrGroupWatchBroke) when the shared watch broke or the caller fell
// behind; the caller then watches again.
func (g *KubernetesLeaseGroup) Watch(ctx context.Context, accept func(name string) bool) (<-chan GroupEvent, error) {
	sub := &groupSub{accept: accept}
	if err := g.subscribe(ctx, sub); err != nil {
		return nil, err
	}
	out := make(chan GroupEvent)
	go forward(ctx, g, sub, out, func(ev GroupEvent) (GroupEvent, bool) { return ev, true })
	return out, nil
}

// subscribe registers sub, a reader of one Lease (sub.name) or of those sub.accept
// takes, and waits until the shared watch is open, starting it if none runs.
func (g *KubernetesLeaseGroup) subscribe(ctx context.Context, sub *groupSub) error {
	sub.wake = make(chan struct{}, 1)
	g.mu.Lock()
	if g.shared == nil {
		wctx, stop := context.WithCancel(context.Background())
		g.shared = &sharedWatch{ready: make(chan struct{}), stop: stop}
		go g.run(wctx, g.shared)
	}
	shared := g.shared
	if sub.name == "" {
		g.subs[sub] = struct{}{}
	} else {
		if g.byName[sub.name] == nil {
			g.byName[sub.name] = map[*groupSub]struct{}{}
		}
		g.byName[sub.name][sub] = struct{}{}
	}
	g.mu.Unlock()
	select {
	case <-shared.ready:
	case <-ctx.Done():
		g.unsubscribe(sub)
		return ctx.Err()
	}
	if shared.err != nil {
		g.unsubscribe(sub)
		return shared.err
	}
	return nil
}

// unsubscribe removes sub; the shared watch stops with its last reader.
func (g *KubernetesLeaseGroup) unsubscribe(sub *groupSub) {
	g.mu.Lock()
	delete(g.subs, sub)
	if named := g.byName[sub.name]; named != nil {
		delete(named, sub)
		if len(named) == 0 {
			delete(g.byName, sub.name)
		}
	}
	var stop context.CancelFunc
	if len(g.subs) == 0 && len(g.byName) == 0 && g.shared != nil {
		stop = g.shared.stop
		g.shared = nil
	}
	g.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// run opens the shared watch (from the current resourceVersion: readers list after
// it opened) and hands its events to the readers until ctx ends or it breaks; then
// it ends every reader's watch (each lists again) unless ctx ended.
func (g *KubernetesLeaseGroup) run(ctx context.Context, shared *sharedWatch) {
	// The watch lives as long as the context of its open: give the open up by
	// cancelling it only while it is under way.
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	giveUp := time.AfterFunc(groupOpenTimeout, cancel)
	w, err := g.open(octx)
	if !giveUp.Stop() {
		if err == nil {
			w.Stop()
		}
		err = fmt.Errorf("%w: opening took more than %v", ErrGroupWatchBroke, groupOpenTimeout)
	}
	shared.err = err
	close(shared.ready)
	if err != nil {
		g.breakAll(shared, err)
		return
	}
	err = kwatch.Read(ctx, w, groupSilence, func(we watch.Event) bool {
		if l, isLease := we.Object.(*coordinationv1.Lease); isLease {
			g.dispatch(GroupEvent{Lease: l, Deleted: we.Type == watch.Deleted})
		}
		return true
	})
	if err != nil && ctx.Err() == nil {
		g.breakAll(shared, fmt.Errorf("%w: %w", ErrGroupWatchBroke, err))
	}
}

// open starts the shared watch at the group's current resourceVersion (a list of
// at most one Lease gives it).
func (g *KubernetesLeaseGroup) open(ctx context.Context) (watch.Interface, error) {
	list, err := g.leases.List(ctx, metav1.ListOptions{LabelSelector: g.selector, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("leaderelection: list leases %s/%s: %w", g.namespace, g.selector, err)
	}
	w, err := g.leases.Watch(ctx, metav1.ListOptions{LabelSelector: g.selector, ResourceVersion: list.ResourceVersion,
		AllowWatchBookmarks: true})
	if err != nil {
		return nil, fmt.Errorf("leaderelection: watch leases %s/%s: %w", g.namespace, g.selector, err)
	}
	return w, nil
}

// dispatch queues ev for every reader that takes its Lease: those of its name, found
// at once, and those of an accept function (a ring's one member watch), asked.
func (g *KubernetesLeaseGroup) dispatch(ev GroupEvent) {
	g.mu.Lock()
	named := g.byName[ev.Lease.Name]
	subs := make([]*groupSub, 0, len(named)+len(g.subs))
	for s := range named {
		subs = append(subs, s)
	}
	for s := range g.subs {
		if s.accept(ev.Lease.Name) {
			subs = append(subs, s)
		}
	}
	g.mu.Unlock()
	for _, s := range subs {
		s.push(ev)
	}
}

// breakAll ends the watch of every reader of shared with err, and forgets shared so
// that the next reader opens a new one.
func (g *KubernetesLeaseGroup) breakAll(shared *sharedWatch, err error) {
	g.mu.Lock()
	if g.shared == shared {
		g.shared = nil
	}
	subs := make([]*groupSub, 0, len(g.subs))
	for s := range g.subs {
		subs = append(subs, s)
	}
	for _, named := range g.byName {
		for s := range named {
			subs = append(subs, s)
		}
	}
	clear(g.subs)
	clear(g.byName)
	g.mu.Unlock()
	shared.stop()
	for _, s := range subs {
		s.push(GroupEvent{Err: err})
	}
}

// groupSub is one reader's queue of events.
type groupSub struct {
	name   string            // the one Lease it reads; "" for those accept takes
	accept func(string) bool // set when name is ""
	wake   chan struct{}     // room for one: a push never blocks

	// mu guards queue and ended.
	mu    sync.Mutex
	queue []GroupEvent
	ended bool // the queue ends with an Err event
}

// push queues ev; a reader groupQueue events behind gets an Err instead, its last.
func (s *groupSub) push(ev GroupEvent) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	if len(s.queue) >= groupQueue {
		ev = GroupEvent{Err: fmt.Errorf("%w: reader %d events behind", ErrGroupWatchBroke, groupQueue)}
	}
	s.queue = append(s.queue, ev)
	s.ended = ev.Err != nil
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next takes the next event, waiting for one; false when ctx ended.
func (s *groupSub) next(ctx context.Context) (GroupEvent, bool) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return ev, true
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return GroupEvent{}, false
		}
	}
}

// forward moves sub's events to out, each as conv makes it (false: skipped), until
// ctx ends or after the event with Err; then it unsubscribes sub and closes out.
func forward[E any](ctx context.Context, g *KubernetesLeaseGroup, sub *groupSub, out chan<- E,
	conv func(GroupEvent) (E, bool)) {
	defer close(out)
	defer g.unsubscribe(sub)
	for {
		ge, ok := sub.next(ctx)
		if !ok {
			return
		}
		ev, ok := conv(ge)
		if !ok {
			continue
		}
		select {
		case out <- ev:
		case <-ctx.Done():
			return
		}
		if ge.Err != nil {
			return
		}
	}
}

// listed returns a list of the group's Leases by label that began after the call:
// the list under way when it was called serves only those who asked before it began,
// and this call shares the next, which begins once that one returned. So a replica
// whose S store watches open at once lists the group once or twice, not S times
// (each a read of the API server, answered as slowly as the reads and writes beside
// it), and each still lists after it subscribed. The call that finds no list under
// way runs the next one, under its ctx; when that ctx ends first, the others ask
// again.
func (g *KubernetesLeaseGroup) listed(ctx context.Context) (*listBatch, error) {
	for {
		g.mu.Lock()
		b := g.next
		if b == nil {
			b = &listBatch{done: make(chan struct{})}
			g.next = b
		}
		g.mu.Unlock()
		if err := g.await(ctx, b); !errors.Is(err, errListAbandoned) {
			return b, err
		}
	}
}

// await waits for batch b's list, running it when no other list is under way.
func (g *KubernetesLeaseGroup) await(ctx context.Context, b *listBatch) error {
	for {
		g.mu.Lock()
		free := g.listFree
		run := free == nil && g.next == b
		if run {
			g.next, g.listFree = nil, make(chan struct{})
		}
		g.mu.Unlock()
		if run {
			g.runList(ctx, b)
			if b.err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return b.err
		}
		select {
		case <-b.done:
			return b.err
		case <-free: // the list under way returned: run b's, if no one else does
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runList lists the group's Leases by label for b, then lets the next list begin.
func (g *KubernetesLeaseGroup) runList(ctx context.Context, b *listBatch) {
	list, err := g.leases.List(ctx, metav1.ListOptions{LabelSelector: g.selector})
	switch {
	case err == nil:
		b.rv, b.leases = list.ResourceVersion, make(map[string]*coordinationv1.Lease, len(list.Items))
		for i := range list.Items {
			b.leases[list.Items[i].Name] = &list.Items[i]
		}
	case ctx.Err() != nil:
		b.err = errListAbandoned
	default:
		b.err = err
	}
	close(b.done)
	g.mu.Lock()
	free := g.listFree
	g.listFree = nil
	g.mu.Unlock()
	close(free)
}

// groupStore is the LeaseStore of one Lease of a KubernetesLeaseGroup.
type groupStore struct {
	*kubernetesStore
	g *KubernetesLeaseGroup
}

// Watch opens a reader of the group's shared watch, then lists the Lease, delivers
// its state and then its events on the shared watch above the list's
// resourceVersion. The list is the group's by label, shared with the store watches
// that open at the same moment (listed); a Lease it does not show is listed by name
// (a Lease not yet labelled is found too, and labelled by its next write). A break
// of the shared watch ends it with an Err event. One goroutine per call moves the
// reader's events to the channel it returns.
func (s *groupStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	sub := &groupSub{name: s.name}
	if err := s.g.subscribe(ctx, sub); err != nil {
		return nil, s.mapError("watch", err, false)
	}
	first, floor, err := s.listShared(ctx)
	if err != nil {
		s.g.unsubscribe(sub)
		return nil, err
	}
	events := make(chan LeaseEvent, watchBuffer)
	events <- first
	go forward(ctx, s.g, sub, events, func(ge GroupEvent) (LeaseEvent, bool) { return s.eventOf(ge, floor) })
	return events, nil
}

// listShared lists the Lease through the group's shared list by label, or by name
// when that list does not show it: its state, as a watch's first event, and the
// resourceVersion of the list.
func (s *groupStore) listShared(ctx context.Context) (LeaseEvent, string, error) {
	b, err := s.g.listed(ctx)
	if err != nil {
		return LeaseEvent{}, "", s.mapError("list", err, false)
	}
	l, ok := b.leases[s.name]
	if !ok {
		return s.list(ctx)
	}
	s.remember(l)
	return LeaseEvent{Record: recordOf(l)}, b.rv, nil
}

// eventOf is ge as the Lease's watch event; false for an event at or below floor
// (the list showed it).
func (s *groupStore) eventOf(ge GroupEvent, floor string) (LeaseEvent, bool) {
	if ge.Err != nil {
		return LeaseEvent{Err: fmt.Errorf("leaderelection: watch lease %s: %w", s, ge.Err)}, true
	}
	if !versionAbove(ge.Lease.ResourceVersion, floor) {
		return LeaseEvent{}, false
	}
	if !ge.Deleted {
		s.remember(ge.Lease)
	}
	return LeaseEvent{Record: recordOf(ge.Lease), Deleted: ge.Deleted}, true
}

// versionAbove reports whether resourceVersion rv is above floor; true when either
// is not a number (then nothing is skipped).
func versionAbove(rv, floor string) bool {
	a, okA := parseVersion(rv)
	b, okB := parseVersion(floor)
	return !okA || !okB || a > b
}
