package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/baton-dev/baton/pkg/k8s/internal/kwatch"
)

// Annotations of the Lease that keep Baton's fields. PreferredHolderAnnotation keeps
// LeaseRecord.PreferredHolder as well as spec.preferredHolder, since an API server
// without the CoordinatedLeaderElection feature drops that field, and one with it
// refuses it without spec.strategy.
const (
	MarkerAnnotation          = "leaderelection.baton.dev/marker"
	PreferredHolderAnnotation = "leaderelection.baton.dev/preferred-holder"
	IncarnationAnnotation     = "leaderelection.baton.dev/incarnation"
)

// kubernetesStore is the LeaseStore of one coordination.k8s.io/v1 Lease.
type kubernetesStore struct {
	leases    coordinationv1client.LeaseInterface
	namespace string
	name      string
	selector  string
	labels    map[string]string // set on every write (a KubernetesLeaseGroup's); nil for none

	// mu guards last.
	mu sync.Mutex
	// last is the newest Lease object seen, so that Update keeps its metadata (labels,
	// annotations, owners) and the spec fields this package does not manage.
	last *coordinationv1.Lease
}

// NewKubernetesStore returns the LeaseStore of the Lease namespace/name, read and
// written with the typed client of clientset; the fields are those of client-go's
// LeaseLock, so stock client-go electors can share the Lease. Watch lists the Lease by
// the field selector metadata.name=name and watches from the list's resourceVersion.
// API conflicts (and AlreadyExists on Create) map to ErrConflict, NotFound on Get and
// Update to ErrLeaseNotFound. It returns an error wrapping ErrInvalidConfig when
// clientset is nil or namespace or name is empty.
func NewKubernetesStore(clientset kubernetes.Interface, namespace, name string) (LeaseStore, error) {
	if err := checkClient(clientset, namespace, name == "", &ConfigError{Field: "LeaseName", Reason: "lease name is empty"}); err != nil {
		return nil, err
	}
	return &kubernetesStore{
		leases:    clientset.CoordinationV1().Leases(namespace),
		namespace: namespace,
		name:      name,
		selector:  fields.OneTermEqualSelector("metadata.name", name).String(),
	}, nil
}

// checkClient returns the ConfigErrors of a nil clientset, an empty namespace and,
// when bad, of one more argument (joined, in that order), or nil.
func checkClient(clientset kubernetes.Interface, namespace string, bad bool, more *ConfigError) error {
	var errs []error
	if clientset == nil {
		errs = append(errs, &ConfigError{Field: "clientset", Reason: "clientset is nil"})
	}
	if namespace == "" {
		errs = append(errs, &ConfigError{Field: "LeaseNamespace", Reason: "lease namespace is empty"})
	}
	if bad {
		errs = append(errs, more)
	}
	return errors.Join(errs...)
}

func (s *kubernetesStore) String() string { return s.namespace + "/" + s.name }

func (s *kubernetesStore) Get(ctx context.Context) (LeaseRecord, error) {
	l, err := s.leases.Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return LeaseRecord{}, s.mapError("get", err, true)
	}
	s.remember(l)
	return recordOf(l), nil
}

func (s *kubernetesStore) Create(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace}}
	setSpec(l, r)
	s.setLabels(l)
	out, err := s.leases.Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		// NotFound here is the namespace: not ErrLeaseNotFound.
		return LeaseRecord{}, s.mapError("create", err, false)
	}
	s.remember(out)
	return recordOf(out), nil
}

func (s *kubernetesStore) Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	if r.ResourceVersion == "" {
		// An update without a version would be unconditional: never send one.
		return LeaseRecord{}, fmt.Errorf("leaderelection: update lease %s without resource version: %w", s, ErrConflict)
	}
	l, err := s.base(ctx, r.ResourceVersion)
	if err != nil {
		return LeaseRecord{}, err
	}
	setSpec(l, r)
	s.setLabels(l)
	out, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return LeaseRecord{}, s.mapError("update", err, true)
	}
	s.remember(out)
	return recordOf(out), nil
}

// base returns a copy of the Lease object at resourceVersion rv to update, reading it
// when it is not the one remembered.
func (s *kubernetesStore) base(ctx context.Context, rv string) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last != nil && last.ResourceVersion == rv {
		return last.DeepCopy(), nil
	}
	l, err := s.leases.Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return nil, s.mapError("update", err, true)
	}
	s.remember(l)
	if l.ResourceVersion != rv {
		return nil, fmt.Errorf("leaderelection: update lease %s: resource version %q is not %q: %w",
			s, rv, l.ResourceVersion, ErrConflict)
	}
	return l.DeepCopy(), nil
}

// remember keeps l if it is newer than the Lease object kept.
func (s *kubernetesStore) remember(l *coordinationv1.Lease) {
	if l == nil || l.Name != s.name {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil {
		if cmp, err := resourceversion.CompareResourceVersion(l.ResourceVersion, s.last.ResourceVersion); err == nil && cmp < 0 {
			return
		}
	}
	s.last = l.DeepCopy()
}

func (s *kubernetesStore) mapError(op string, err error, notFound bool) error {
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return fmt.Errorf("leaderelection: %s lease %s: %w: %w", op, s, ErrConflict, err)
	case notFound && apierrors.IsNotFound(err):
		return fmt.Errorf("leaderelection: %s lease %s: %w: %w", op, s, ErrLeaseNotFound, err)
	default:
		return fmt.Errorf("leaderelection: %s lease %s: %w", op, s, err)
	}
}

// watchBuffer is how many events a Kubernetes watch holds for the elector to read.
const watchBuffer = 16

// Watch lists the Lease, delivers its state, and then the events of a watch started at
// the list's resourceVersion, from a goroutine that closes the channel and stops the
// watch when ctx ends, the server ends the watch, or it reports an error (for example
// 410 Gone when the version is too old).
func (s *kubernetesStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	first, rv, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	w, err := s.leases.Watch(ctx, metav1.ListOptions{
		FieldSelector:       s.selector,
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		return nil, s.mapError("watch", err, false)
	}
	// Buffered, so events the server sent while the elector was busy (waiting for a
	// write's answer) are in the channel when it looks, not a goroutine away.
	events := make(chan LeaseEvent, watchBuffer)
	events <- first
	go func() {
		defer close(events)
		err := kwatch.Read(ctx, w, 0, func(we watch.Event) bool {
			l, isLease := we.Object.(*coordinationv1.Lease)
			if !isLease || l.Name != s.name {
				return true
			}
			ev := LeaseEvent{Record: recordOf(l), Deleted: we.Type == watch.Deleted}
			if !ev.Deleted {
				s.remember(l)
			}
			select {
			case events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
		if err != nil && !errors.Is(err, kwatch.ErrClosed) {
			select {
			case events <- LeaseEvent{Err: fmt.Errorf("leaderelection: watch lease %s: %w", s, err)}:
			case <-ctx.Done():
			}
		}
	}()
	return events, nil
}

// list reads the Lease's state as a watch's first event, and the list's
// resourceVersion, above which a watch's events are news.
func (s *kubernetesStore) list(ctx context.Context) (LeaseEvent, string, error) {
	list, err := s.leases.List(ctx, metav1.ListOptions{FieldSelector: s.selector})
	if err != nil {
		return LeaseEvent{}, "", s.mapError("list", err, false)
	}
	first := LeaseEvent{Deleted: true, Record: LeaseRecord{ResourceVersion: list.ResourceVersion}}
	for i := range list.Items {
		if l := &list.Items[i]; l.Name == s.name {
			s.remember(l)
			first = LeaseEvent{Record: recordOf(l)}
		}
	}
	return first, list.ResourceVersion, nil
}

// recordOf reads the client-go leader election fields of l.
func recordOf(l *coordinationv1.Lease) LeaseRecord {
	r := LeaseRecord{ResourceVersion: l.ResourceVersion, UID: string(l.UID)}
	if p := l.Spec.HolderIdentity; p != nil {
		r.HolderIdentity = *p
	}
	if p := l.Spec.LeaseDurationSeconds; p != nil {
		r.LeaseDuration = time.Duration(*p) * time.Second
	}
	if p := l.Spec.AcquireTime; p != nil {
		r.AcquireTime = p.Time
	}
	if p := l.Spec.RenewTime; p != nil {
		r.RenewTime = p.Time
	}
	if p := l.Spec.LeaseTransitions; p != nil {
		r.LeaseTransitions = *p
	}
	if p := l.Spec.Strategy; p != nil {
		r.Strategy = string(*p)
	}
	r.PreferredHolder = l.Annotations[PreferredHolderAnnotation]
	if p := l.Spec.PreferredHolder; p != nil && *p != "" {
		r.PreferredHolder = *p
	}
	r.Marker = l.Annotations[MarkerAnnotation]
	r.Incarnation = l.Annotations[IncarnationAnnotation]
	return r
}

// setSpec writes r into l's spec as client-go's LeaseLock does, and its Marker into
// MarkerAnnotation; the duration is rounded up to whole seconds, so followers never
// wait less than the holder promised. Other metadata of l is kept.
func setSpec(l *coordinationv1.Lease, r LeaseRecord) {
	holder := r.HolderIdentity
	seconds := leaseSeconds(r.LeaseDuration)
	transitions := r.LeaseTransitions
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &seconds
	l.Spec.AcquireTime = microTime(r.AcquireTime)
	l.Spec.RenewTime = microTime(r.RenewTime)
	l.Spec.LeaseTransitions = &transitions
	l.Spec.Strategy, l.Spec.PreferredHolder = nil, nil
	if r.Strategy != "" {
		strategy := coordinationv1.CoordinatedLeaseStrategy(r.Strategy)
		l.Spec.Strategy = &strategy
		if r.PreferredHolder != "" { // the API server refuses it without a strategy
			preferred := r.PreferredHolder
			l.Spec.PreferredHolder = &preferred
		}
	}
	setAnnotation(l, MarkerAnnotation, r.Marker)
	setAnnotation(l, PreferredHolderAnnotation, r.PreferredHolder)
	setAnnotation(l, IncarnationAnnotation, r.Incarnation)
}

// setLabels sets the store's labels on l, keeping its others.
func (s *kubernetesStore) setLabels(l *coordinationv1.Lease) {
	for k, v := range s.labels {
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[k] = v
	}
}

// setAnnotation sets l's annotation key to value, or removes it for "".
func setAnnotation(l *coordinationv1.Lease, key, value string) {
	switch {
	case value != "":
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[key] = value
	case l.Annotations != nil:
		delete(l.Annotations, key)
	}
}

// leaseSeconds is d in whole seconds, rounded up, at least 1 for a positive d, and
// saturated at the int32 maximum instead of wrapping (Config caps LeaseDuration at an
// hour; this guards records written by other means).
func leaseSeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(s)
}

func microTime(t time.Time) *metav1.MicroTime {
	if t.IsZero() {
		return nil
	}
	return &metav1.MicroTime{Time: t}
}
