package sharding

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// RingLabel is the label of a ring's member Leases; its value is the ring's name.
const RingLabel = "sharding.baton.dev/ring"

// Annotations of a member Lease: the writer's Ring.Shape and its MemberState.
const (
	ShapeAnnotation       = "sharding.baton.dev/shape"
	MemberStateAnnotation = "sharding.baton.dev/state"
	// IncarnationAnnotation is the writer's MemberLease.Incarnation.
	IncarnationAnnotation = "sharding.baton.dev/incarnation"
	// ShardsAnnotation is the writer's MemberLease.Shards.
	ShardsAnnotation = "sharding.baton.dev/shards"
	// HandOffsAnnotation is "true" when the writer's MemberLease.HandOffs is.
	HandOffsAnnotation = "sharding.baton.dev/handoffs"
)

// ShardLeaseName returns the name of shard's Lease in ring.
func ShardLeaseName(ring string, shard int) string { return fmt.Sprintf("%s-shard-%d", ring, shard) }

// MemberLeaseName returns the name of identity's member Lease in ring.
func MemberLeaseName(ring, identity string) string { return ring + "-member-" + identity }

// New returns a Sharder for config's ring on the Leases of config.Namespace, read and
// written with clientset's typed client: the shard Leases "<Name>-shard-<i>" and the
// member Leases "<Name>-member-<identity>" (KubeMembers), all labelled
// RingLabel=<Name> and watched through one watch of that label
// (leaderelection.KubernetesLeaseGroup): a replica holds one watch for the ring,
// whatever its number of shards. It needs get, list, watch, create, update and delete
// on coordination.k8s.io leases in that namespace. Errors as NewWithStores's.
//
// A quiet replica writes one Lease per RetryPeriod (its member Lease; shard Leases
// are written only when they change hands), but a rebalance or a crash moves many
// shards at once, a write each: client-go's default client rate limit (5 QPS,
// burst 10, on a rest.Config that sets none) slows those hand-overs; give clientset
// a config with QPS and Burst above Shards/RetryPeriod (a config from
// controller-runtime's GetConfig has the client-side limit off).
func New(config Config, clientset kubernetes.Interface, callbacks Callbacks, logger *slog.Logger) (*Sharder, error) {
	if clientset == nil {
		return nil, fmt.Errorf("%w: clientset: nil", ErrInvalidConfig)
	}
	members, err := NewKubeMembers(clientset, config.Namespace, config.Name)
	if err != nil {
		return nil, err
	}
	group, err := leaderelection.NewKubernetesLeaseGroup(clientset, config.Namespace, RingLabel, config.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	members.group = group
	stores := Stores{
		Members: members,
		Shard:   func(i int) leaderelection.LeaseStore { return group.Store(ShardLeaseName(config.Name, i)) },
	}
	return NewWithStores(config, stores, callbacks, logger)
}

// KubeMembers is the MemberStore of a ring on Kubernetes: one Lease per member,
// named "<ring>-member-<identity>", labelled RingLabel=<ring>, its holderIdentity the
// member's identity. Safe for concurrent use.
type KubeMembers struct {
	leases coordinationclient.LeaseInterface
	ring   string
	// group, when set (New sets it), is the ring's shared watch, which Watch follows
	// instead of a watch of its own.
	group *leaderelection.KubernetesLeaseGroup

	// mu guards own.
	mu  sync.Mutex
	own map[string]*coordinationv1.Lease // the last write of each identity's lease, for the next renew
}

var _ MemberStore = (*KubeMembers)(nil)

// NewKubeMembers returns the member store of ring in namespace. It returns an error
// wrapping ErrInvalidConfig when clientset is nil or namespace or ring is empty.
func NewKubeMembers(clientset kubernetes.Interface, namespace, ring string) (*KubeMembers, error) {
	switch {
	case clientset == nil:
		return nil, fmt.Errorf("%w: clientset: nil", ErrInvalidConfig)
	case namespace == "":
		return nil, fmt.Errorf("%w: Namespace: empty", ErrInvalidConfig)
	case ring == "":
		return nil, fmt.Errorf("%w: Name: empty", ErrInvalidConfig)
	}
	return &KubeMembers{
		leases: clientset.CoordinationV1().Leases(namespace),
		ring:   ring,
		own:    map[string]*coordinationv1.Lease{},
	}, nil
}

// Renew updates lease.Identity's member lease on its last write, and when that fails
// (a conflict, or the lease is gone) reads it and updates it, or creates it.
func (k *KubeMembers) Renew(ctx context.Context, lease MemberLease) (string, error) {
	identity := lease.Identity
	k.mu.Lock()
	last := k.own[identity]
	k.mu.Unlock()
	if last != nil {
		if out, err := k.leases.Update(ctx, k.renewal(last, lease), metav1.UpdateOptions{}); err == nil {
			k.remember(identity, out)
			return out.ResourceVersion, nil
		} else if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("sharding: renew member lease of %s: %w", identity, err)
		}
	}
	name := MemberLeaseName(k.ring, identity)
	cur, err := k.leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cur, err = k.leases.Create(ctx, k.renewal(fresh, lease), metav1.CreateOptions{})
	case err == nil:
		cur, err = k.leases.Update(ctx, k.renewal(cur, lease), metav1.UpdateOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("sharding: renew member lease of %s: %w", identity, err)
	}
	k.remember(identity, cur)
	return cur.ResourceVersion, nil
}

// renewal returns a copy of l renewed now as lease says.
func (k *KubeMembers) renewal(l *coordinationv1.Lease, lease MemberLease) *coordinationv1.Lease {
	out := l.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[RingLabel] = k.ring
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	setOrDelete(out.Annotations, ShapeAnnotation, lease.Shape)
	setOrDelete(out.Annotations, MemberStateAnnotation, string(lease.State))
	setOrDelete(out.Annotations, IncarnationAnnotation, lease.Incarnation)
	setOrDelete(out.Annotations, ShardsAnnotation, lease.Shards)
	handOffs := ""
	if lease.HandOffs {
		handOffs = "true"
	}
	setOrDelete(out.Annotations, HandOffsAnnotation, handOffs)
	seconds := int32(lease.LeaseDuration.Round(time.Second) / time.Second)
	now := metav1.NewMicroTime(time.Now())
	identity := lease.Identity
	out.Spec.HolderIdentity = &identity
	out.Spec.LeaseDurationSeconds = &seconds
	out.Spec.RenewTime = &now
	if out.Spec.AcquireTime == nil {
		out.Spec.AcquireTime = &now
	}
	return out
}

func setOrDelete(m map[string]string, key, value string) {
	if value == "" {
		delete(m, key)
		return
	}
	m[key] = value
}

func (k *KubeMembers) remember(identity string, l *coordinationv1.Lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.own[identity] = l
}

// Leave deletes identity's member lease.
func (k *KubeMembers) Leave(ctx context.Context, identity string) error {
	k.mu.Lock()
	delete(k.own, identity)
	k.mu.Unlock()
	err := k.leases.Delete(ctx, MemberLeaseName(k.ring, identity), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("sharding: delete member lease of %s: %w", identity, err)
	}
	return nil
}

// Expire deletes identity's member lease if its resourceVersion is still version.
func (k *KubeMembers) Expire(ctx context.Context, identity, version string) error {
	err := k.leases.Delete(ctx, MemberLeaseName(k.ring, identity), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &version}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("sharding: delete expired member lease of %s: %w", identity, err)
	}
	return nil
}

// isMember reports whether name is one of the ring's member Leases (its shard Leases
// carry the ring's label too).
func (k *KubeMembers) isMember(name string) bool {
	return strings.HasPrefix(name, MemberLeaseName(k.ring, ""))
}

// List reads the ring's member leases afresh (a quorum list by RingLabel), for the
// fresh read of a holder's liveness (memberSigns.Confirm).
func (k *KubeMembers) List(ctx context.Context) ([]MemberLease, error) {
	members, _, err := k.list(ctx)
	if err != nil {
		return nil, err
	}
	return snapshot(members), nil
}

// list lists the ring's member leases, with the list's resourceVersion.
func (k *KubeMembers) list(ctx context.Context) (map[string]MemberLease, string, error) {
	list, err := k.leases.List(ctx, metav1.ListOptions{LabelSelector: RingLabel + "=" + k.ring})
	if err != nil {
		return nil, "", fmt.Errorf("sharding: list member leases of %s: %w", k.ring, err)
	}
	members := map[string]MemberLease{}
	for i := range list.Items {
		if k.isMember(list.Items[i].Name) {
			put(members, &list.Items[i])
		}
	}
	return members, list.ResourceVersion, nil
}

// Watch lists the ring's member leases (by RingLabel) and watches them from the
// list's resourceVersion, delivering every member after the list and after each
// change, skipping to the latest when the reader is slow. With the ring's shared
// watch (New), it follows that watch instead of opening one.
func (k *KubeMembers) Watch(ctx context.Context) (<-chan MemberEvent, error) {
	if k.group != nil {
		return k.watchGroup(ctx)
	}
	members, rv, err := k.list(ctx)
	if err != nil {
		return nil, err
	}
	w, err := k.leases.Watch(ctx, metav1.ListOptions{LabelSelector: RingLabel + "=" + k.ring, ResourceVersion: rv})
	if err != nil {
		return nil, fmt.Errorf("sharding: watch member leases of %s: %w", k.ring, err)
	}
	slot := make(chan MemberEvent, 1) // the latest event not yet taken
	offer := func(ev MemberEvent) {
		select {
		case <-slot:
		default:
		}
		slot <- ev
	}
	offer(MemberEvent{Members: snapshot(members)})
	out := make(chan MemberEvent)
	go func() {
		defer close(out)
		defer w.Stop()
		in := w.ResultChan()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-slot:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
				if ev.Err != nil {
					return
				}
			case e, ok := <-in:
				switch {
				case !ok:
					offer(MemberEvent{Err: fmt.Errorf("sharding: member watch of %s closed", k.ring)})
					in = nil
				case e.Type == watch.Error:
					offer(MemberEvent{Err: fmt.Errorf("sharding: member watch of %s: %v", k.ring, apierrors.FromObject(e.Object))})
					in = nil
				case e.Type == watch.Deleted:
					if l, ok := e.Object.(*coordinationv1.Lease); ok && k.isMember(l.Name) {
						delete(members, l.Name)
						offer(MemberEvent{Members: snapshot(members)})
					}
				case e.Type == watch.Added || e.Type == watch.Modified:
					if l, ok := e.Object.(*coordinationv1.Lease); ok && k.isMember(l.Name) {
						put(members, l)
						offer(MemberEvent{Members: snapshot(members)})
					}
				}
			}
		}
	}()
	return out, nil
}

// put records l, keyed by its name, unless it has no holder.
func put(members map[string]MemberLease, l *coordinationv1.Lease) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		delete(members, l.Name)
		return
	}
	d := time.Duration(0)
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	members[l.Name] = MemberLease{Identity: *l.Spec.HolderIdentity, LeaseDuration: d, Version: l.ResourceVersion,
		Shape: l.Annotations[ShapeAnnotation], State: MemberState(l.Annotations[MemberStateAnnotation]),
		Incarnation: l.Annotations[IncarnationAnnotation], Shards: l.Annotations[ShardsAnnotation],
		HandOffs: l.Annotations[HandOffsAnnotation] == "true"}
}

func snapshot(members map[string]MemberLease) []MemberLease {
	out := make([]MemberLease, 0, len(members))
	for _, m := range members {
		out = append(out, m)
	}
	return out
}

// watchGroup is Watch on the ring's shared watch: it opens a reader of the member
// Leases, lists them, and delivers every member after the list and after each
// change above the list's resourceVersion, skipping to the latest when the reader
// is slow. A break of the shared watch ends it after an event with Err.
func (k *KubeMembers) watchGroup(ctx context.Context) (<-chan MemberEvent, error) {
	wctx, cancel := context.WithCancel(ctx)
	in, err := k.group.Watch(wctx, k.isMember)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("sharding: watch member leases of %s: %w", k.ring, err)
	}
	members, floor, err := k.list(ctx)
	if err != nil {
		cancel()
		for range in {
		}
		return nil, err
	}
	out := make(chan MemberEvent, 1) // holds the latest event not yet taken
	out <- MemberEvent{Members: snapshot(members)}
	go func() {
		defer close(out)
		defer func() {
			cancel()
			for range in {
			}
		}()
		for ge := range in {
			ev, ok := applyGroupEvent(members, ge, floor)
			if !ok {
				continue
			}
			select { // replace an event not yet taken: each is the whole state
			case <-out:
			default:
			}
			out <- ev
			if ev.Err != nil {
				return
			}
		}
	}()
	return out, nil
}

// applyGroupEvent applies ge to members and returns the event to deliver; false for
// an event at or below floor (the list showed it).
func applyGroupEvent(members map[string]MemberLease, ge leaderelection.GroupEvent, floor string) (MemberEvent, bool) {
	if ge.Err != nil {
		return MemberEvent{Err: ge.Err}, true
	}
	if !atLeast(ge.Lease.ResourceVersion, floor) || ge.Lease.ResourceVersion == floor {
		return MemberEvent{}, false
	}
	if ge.Deleted {
		delete(members, ge.Lease.Name)
	} else {
		put(members, ge.Lease)
	}
	return MemberEvent{Members: snapshot(members)}, true
}
