package leaderelection

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// versionedClientset is a fake clientset whose Lease writes get resourceVersions and
// whose updates are compare-and-swap, like the API server's (the stock fake does
// neither). It is for the mapping logic of the store; the real server is tested
// elsewhere.
func versionedClientset(objects ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objects...)
	var mu sync.Mutex
	version := 100
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		version++
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		l.ResourceVersion = strconv.Itoa(version)
		return false, nil, nil // the tracker stores it
	})
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		cur, err := cs.Tracker().Get(gr.WithVersion("v1"), l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := cur.(*coordinationv1.Lease).ResourceVersion; rv != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(gr, l.Name, errors.New("the object has been modified"))
		}
		version++
		l.ResourceVersion = strconv.Itoa(version)
		return false, nil, nil
	})
	return cs
}

func TestKubernetesStoreMapping(t *testing.T) {
	ctx := context.Background()
	cs := versionedClientset()
	s, err := NewKubernetesStore(cs, "ns", "lease")
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "ns/lease" {
		t.Errorf("String = %q", s.String())
	}
	if _, err := s.Get(ctx); !errors.Is(err, ErrLeaseNotFound) || !apierrors.IsNotFound(err) {
		t.Fatalf("Get of absent lease: %v", err)
	}
	if _, err := s.Update(ctx, LeaseRecord{HolderIdentity: "a", ResourceVersion: "1"}); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("Update of absent lease: %v", err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	r1, err := s.Create(ctx, LeaseRecord{HolderIdentity: "a", LeaseDuration: 1500 * time.Millisecond,
		AcquireTime: now, RenewTime: now, LeaseTransitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := LeaseRecord{HolderIdentity: "a", LeaseDuration: 2 * time.Second, // rounded up
		AcquireTime: now, RenewTime: now, LeaseTransitions: 3, ResourceVersion: "101"}
	if !sameSpec(r1, want) || r1.ResourceVersion != want.ResourceVersion {
		t.Fatalf("Create = %+v, want %+v", r1, want)
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "a" || *l.Spec.LeaseDurationSeconds != 2 || !l.Spec.RenewTime.Time.Equal(now) ||
		!l.Spec.AcquireTime.Time.Equal(now) || *l.Spec.LeaseTransitions != 3 {
		t.Fatalf("stored spec %+v", l.Spec)
	}
	if _, err := s.Create(ctx, LeaseRecord{HolderIdentity: "b"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Create of present lease: %v", err)
	}

	// Someone labels the lease: the version moves, the store's Update must use it and
	// keep the label.
	l.Labels = map[string]string{"team": "x"}
	l.Spec.PreferredHolder = ptr("b")
	l2, err := cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, LeaseRecord{HolderIdentity: "a", ResourceVersion: r1.ResourceVersion}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Update with stale version: %v", err)
	}
	got, err := s.Get(ctx)
	if err != nil || got.ResourceVersion != l2.ResourceVersion || !sameCore(got, r1) || got.PreferredHolder != "b" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	// The record's strategy, preferred holder and marker round-trip; labels and other
	// annotations are kept.
	l2.Annotations = map[string]string{"note": "kept"}
	if l2, err = cs.CoordinationV1().Leases("ns").Update(ctx, l2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.ResourceVersion = l2.ResourceVersion
	want3 := LeaseRecord{HolderIdentity: "b", LeaseDuration: time.Second, Strategy: "OldestEmulationVersion",
		PreferredHolder: "c", Marker: holderMarker("b"), ResourceVersion: got.ResourceVersion}
	r3, err := s.Update(ctx, want3)
	if err != nil || !sameSpec(r3, want3) {
		t.Fatalf("Update = %+v, %v; want %+v", r3, err, want3)
	}
	l3, _ := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	if l3.Labels["team"] != "x" || l3.Annotations["note"] != "kept" || l3.Annotations[MarkerAnnotation] != holderMarker("b") ||
		l3.Annotations[PreferredHolderAnnotation] != "c" ||
		ptrDeref(l3.Spec.PreferredHolder) != "c" || l3.Spec.Strategy == nil || *l3.Spec.Strategy != "OldestEmulationVersion" {
		t.Fatalf("Update dropped metadata or spec fields: %+v", l3)
	}
	if got, err := s.Get(ctx); err != nil || !sameSpec(got, want3) {
		t.Fatalf("Get after Update = %+v, %v", got, err)
	}
	// A record without them clears them, the marker annotation included.
	r3, err = s.Update(ctx, LeaseRecord{HolderIdentity: "b", LeaseDuration: time.Second, ResourceVersion: r3.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	l3, _ = cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	if _, ok := l3.Annotations[MarkerAnnotation]; ok || l3.Spec.PreferredHolder != nil || l3.Spec.Strategy != nil || l3.Annotations["note"] != "kept" {
		t.Fatalf("Update without marker, strategy and preferred holder: %+v", l3)
	}
	if _, ok := l3.Annotations[PreferredHolderAnnotation]; ok {
		t.Fatalf("preferred holder annotation kept: %+v", l3.Annotations)
	}
	// Without a strategy the preferred holder goes to the annotation only (the API
	// server refuses spec.preferredHolder without spec.strategy).
	r4, err := s.Update(ctx, LeaseRecord{HolderIdentity: "", PreferredHolder: "d", ResourceVersion: r3.ResourceVersion})
	if err != nil || r4.PreferredHolder != "d" {
		t.Fatalf("Update = %+v, %v", r4, err)
	}
	if l4, _ := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{}); l4.Spec.PreferredHolder != nil ||
		l4.Annotations[PreferredHolderAnnotation] != "d" {
		t.Fatalf("preferred holder without strategy: %+v", l4)
	}
	r3 = r4
	if _, err := s.Update(ctx, LeaseRecord{HolderIdentity: "c"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Update without version: %v", err)
	}

	// Another store (no remembered object) reads before updating.
	other, _ := NewKubernetesStore(cs, "ns", "lease")
	if _, err := other.Update(ctx, LeaseRecord{HolderIdentity: "c", ResourceVersion: r3.ResourceVersion}); err != nil {
		t.Fatalf("Update through a fresh store: %v", err)
	}
	if l4, _ := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{}); l4.Labels["team"] != "x" {
		t.Fatalf("fresh store dropped labels: %+v", l4.ObjectMeta)
	}

	// Other API errors pass through unmapped.
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	if _, err := s.Get(ctx); err == nil || errors.Is(err, ErrLeaseNotFound) || errors.Is(err, ErrConflict) || !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("Get with server down: %v", err)
	}
}

func TestKubernetesStoreCreateNamespaceMissing(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns")
	})
	s, _ := NewKubernetesStore(cs, "ns", "lease")
	if _, err := s.Create(context.Background(), LeaseRecord{HolderIdentity: "a"}); err == nil || errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("Create in a missing namespace: %v, want a plain error", err)
	}
}

func TestKubernetesStoreWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}}
	cs := versionedClientset(other)
	s, _ := NewKubernetesStore(cs, "ns", "lease")
	events, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; !ev.Deleted || !zeroSpec(ev.Record) {
		t.Fatalf("first event of an absent lease %+v", ev)
	}
	r1, err := s.Create(ctx, LeaseRecord{HolderIdentity: "a", LeaseDuration: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A change of another lease in the namespace is not reported.
	if _, err := cs.CoordinationV1().Leases("ns").Update(ctx, other, metav1.UpdateOptions{}); err == nil {
		t.Log("updated the other lease")
	}
	if ev := <-events; ev.Deleted || ev.Record != r1 {
		t.Fatalf("event %+v, want %+v", ev, r1)
	}
	if err := cs.CoordinationV1().Leases("ns").Delete(ctx, "lease", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := <-events; !ev.Deleted || ev.Record.HolderIdentity != "a" {
		t.Fatalf("delete event %+v", ev)
	}

	// A second watch starts with the current state.
	r2, _ := s.Create(ctx, LeaseRecord{HolderIdentity: "b", LeaseDuration: time.Second})
	wctx, wcancel := context.WithCancel(ctx)
	second, err := s.Watch(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-second; ev.Deleted || ev.Record != r2 {
		t.Fatalf("first event %+v, want %+v", ev, r2)
	}
	wcancel()
	for range second { // closed by the store after ctx ends
	}
	cancel()
	for range events {
	}
}

func ptr[T any](v T) *T { return &v }

func ptrDeref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestLeaseSeconds: durations round up to whole seconds and saturate instead of
// wrapping (2^31 s once became 1 s, defect 5).
func TestLeaseSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int32
	}{
		{0, 0}, {-time.Second, 0}, {time.Nanosecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2},
		{time.Hour, 3600}, {(1 << 31) * time.Second, 1<<31 - 1}, {1<<63 - 1, 1<<31 - 1},
	} {
		if got := leaseSeconds(tc.d); got != tc.want {
			t.Errorf("leaseSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// TestKubernetesStoreWatchError: a watch.Error event (410 Gone) is delivered as an
// event with Err, after which the channel closes.
func TestKubernetesStoreWatchError(t *testing.T) {
	cs := versionedClientset()
	fw := watch.NewFake()
	cs.PrependWatchReactor("leases", k8stesting.DefaultWatchReactor(fw, nil))
	s, _ := NewKubernetesStore(cs, "ns", "lease")
	events, err := s.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; !ev.Deleted || ev.Err != nil {
		t.Fatalf("first event %+v", ev)
	}
	go fw.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	ev := <-events
	if ev.Err == nil || !apierrors.IsResourceExpired(ev.Err) || !strings.Contains(ev.Err.Error(), "watch lease ns/lease") {
		t.Fatalf("error event %+v", ev)
	}
	if _, ok := <-events; ok {
		t.Fatal("channel open after the error")
	}
}

// TestKubernetesStoreIncarnation: the incarnation round-trips through its annotation,
// which an empty one removes, and the binding to acquireTime survives the MicroTime.
func TestKubernetesStoreIncarnation(t *testing.T) {
	ctx := context.Background()
	s, err := NewKubernetesStore(versionedClientset(), "ns", "lease")
	if err != nil {
		t.Fatal(err)
	}
	now := wallClock(time.Date(2026, 1, 2, 3, 4, 5, 6789, time.Local))
	r := LeaseRecord{HolderIdentity: "a", AcquireTime: now, RenewTime: now, Marker: holderMarker("a"),
		Incarnation: boundIncarnation(now, now, "ns/a/uid/c/0123")}
	out, err := s.Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Incarnation != r.Incarnation || holderIncarnation(got) != "ns/a/uid/c/0123" {
		t.Fatalf("read back incarnation %q (holder's %q), want %q", got.Incarnation, holderIncarnation(got), r.Incarnation)
	}
	out.Incarnation = ""
	if _, err := s.Update(ctx, out); err != nil {
		t.Fatal(err)
	}
	l, err := s.(*kubernetesStore).leases.Get(ctx, "lease", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := l.Annotations[IncarnationAnnotation]; ok {
		t.Fatalf("annotation after clearing: %q, want none", v)
	}
}
