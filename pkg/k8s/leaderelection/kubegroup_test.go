package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
)

// TestKubernetesLeaseGroupOneWatch: two Leases of a group are watched through one
// watch of the API; each store's watch starts with its Lease's state and then gets
// its own Lease's events only, two stores of one Lease both get them, and a reader
// of the whole group gets every event; every write labels the Lease.
func TestKubernetesLeaseGroupOneWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := versionedClientset()
	g, err := NewKubernetesLeaseGroup(cs, "ns", "ring", "r")
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.Store("r-shard-0"), g.Store("r-shard-1")
	ea, err := a.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ea2, err := g.Store("r-shard-0").Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := g.Watch(ctx, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	for _, events := range []<-chan LeaseEvent{ea, eb, ea2} {
		if ev := <-events; !ev.Deleted {
			t.Fatalf("first event of an absent lease %+v", ev)
		}
	}
	ra, err := a.Create(ctx, LeaseRecord{HolderIdentity: "x", LeaseDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Create(ctx, LeaseRecord{HolderIdentity: "y", LeaseDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-ea; ev.Record != ra {
		t.Fatalf("a's event %+v, want %+v", ev, ra)
	}
	if ev := <-eb; ev.Record != rb {
		t.Fatalf("b's event %+v, want its own %+v", ev, rb)
	}
	if ev := <-ea2; ev.Record != ra {
		t.Fatalf("the second store of a's Lease got %+v, want %+v", ev, ra)
	}
	for _, want := range []string{"r-shard-0", "r-shard-1"} {
		if ge := <-all; ge.Err != nil || ge.Lease.Name != want {
			t.Fatalf("the group reader got %+v, want the event of %s", ge, want)
		}
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "r-shard-0", metav1.GetOptions{})
	if err != nil || l.Labels["ring"] != "r" {
		t.Fatalf("created lease labels %v (%v), want ring=r", l.GetLabels(), err)
	}
	watches := 0
	for _, act := range cs.Actions() {
		if act.GetVerb() == "watch" {
			watches++
		}
	}
	if watches != 1 {
		t.Fatalf("%d watches of the API for two stores, want 1", watches)
	}
}

// TestKubernetesLeaseGroupBreak: a break of the shared watch ends every store's
// watch with an Err event, and the next watch opens a new shared one.
func TestKubernetesLeaseGroupBreak(t *testing.T) {
	cs := versionedClientset()
	fw := watch.NewFake()
	cs.PrependWatchReactor("leases", k8stesting.DefaultWatchReactor(fw, nil))
	g, _ := NewKubernetesLeaseGroup(cs, "ns", "ring", "r")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chans []<-chan LeaseEvent
	for _, name := range []string{"r-shard-0", "r-shard-1"} {
		events, err := g.Store(name).Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		<-events
		chans = append(chans, events)
	}
	go fw.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	for i, events := range chans {
		ev := <-events
		if ev.Err == nil || !errors.Is(ev.Err, ErrGroupWatchBroke) || !apierrors.IsResourceExpired(ev.Err) {
			t.Fatalf("store %d: event %+v, want the break", i, ev)
		}
		if _, ok := <-events; ok {
			t.Fatalf("store %d: channel open after the break", i)
		}
	}
	cs.PrependWatchReactor("leases", k8stesting.DefaultWatchReactor(watch.NewFake(), nil))
	events, err := g.Store("r-shard-0").Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; !ev.Deleted || ev.Err != nil {
		t.Fatalf("first event after the break %+v", ev)
	}
}

// TestKubernetesLeaseGroupSilence: a shared watch that delivers nothing, not even a
// bookmark, for groupSilence is taken as stuck: its readers' watches end with the
// break, so that they list again on a new one.
func TestKubernetesLeaseGroupSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := versionedClientset()
		fw := watch.NewFake()
		cs.PrependWatchReactor("leases", k8stesting.DefaultWatchReactor(fw, nil))
		g, _ := NewKubernetesLeaseGroup(cs, "ns", "ring", "r")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		events, err := g.Store("r-shard-0").Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		<-events
		opened := time.Now()
		ev := <-events
		if !errors.Is(ev.Err, ErrGroupWatchBroke) {
			t.Fatalf("event %+v, want the break", ev)
		}
		if d := time.Since(opened); d != groupSilence {
			t.Fatalf("broken after %v of silence, want %v", d, groupSilence)
		}
		for range events {
		}
	})
}

// ctxClientset is a fake clientset whose Lease watches end when the context of their
// Watch call ends, as a real client's stream does.
type ctxClientset struct {
	*fake.Clientset
}

func (c ctxClientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return ctxCoordination{c.Clientset.CoordinationV1()}
}

type ctxCoordination struct {
	coordinationv1client.CoordinationV1Interface
}

func (c ctxCoordination) Leases(namespace string) coordinationv1client.LeaseInterface {
	return ctxLeases{c.CoordinationV1Interface.Leases(namespace)}
}

type ctxLeases struct {
	coordinationv1client.LeaseInterface
}

func (l ctxLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.LeaseInterface.Watch(ctx, opts)
	if err == nil {
		context.AfterFunc(ctx, w.Stop)
	}
	return w, err
}

// TestKubernetesLeaseGroupOutlivesItsOpen: the shared watch keeps delivering after
// its open returned (the open's timeout once cancelled the context the stream lives
// by, and every watch of a ring broke at once and again).
func TestKubernetesLeaseGroupOutlivesItsOpen(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := versionedClientset()
	g, err := NewKubernetesLeaseGroup(ctxClientset{cs}, "ns", "ring", "r")
	if err != nil {
		t.Fatal(err)
	}
	s := g.Store("r-shard-0")
	events, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-events
	r, err := s.Create(ctx, LeaseRecord{HolderIdentity: "x", LeaseDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Err != nil || ev.Record != r {
		t.Fatalf("event after the open %+v, want the create %+v", ev, r)
	}
}

// TestKubernetesLeaseGroupSharedList: store watches that open at once share one list
// of the group by label, begun after each subscribed (those that ask while a list is
// under way share the next); a Lease the list does not show (unlabelled, or absent)
// is listed by name; each watch starts with its own Lease's state.
func TestKubernetesLeaseGroupSharedList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := versionedClientset()
		g, err := NewKubernetesLeaseGroup(ctxClientset{cs}, "ns", "ring", "r")
		if err != nil {
			t.Fatal(err)
		}
		const labelled = 8
		want := map[string]LeaseRecord{}
		for i := range labelled {
			name := fmt.Sprintf("r-shard-%d", i)
			r, err := g.Store(name).Create(ctx, LeaseRecord{HolderIdentity: fmt.Sprintf("h%d", i), LeaseDuration: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			want[name] = r
		}
		bare, err := NewKubernetesStore(cs, "ns", "r-shard-bare")
		if err != nil {
			t.Fatal(err)
		}
		if want["r-shard-bare"], err = bare.Create(ctx, LeaseRecord{HolderIdentity: "hb", LeaseDuration: time.Second}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var byLabel, byName int
		release := make(chan struct{})
		cs.PrependReactor("list", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			la := a.(k8stesting.ListActionImpl)
			if la.ListOptions.Limit == 1 {
				return false, nil, nil // the shared watch's open
			}
			mu.Lock()
			first := false
			if la.ListRestrictions.Labels.Empty() {
				byName++
			} else {
				byLabel++
				first = byLabel == 1
			}
			mu.Unlock()
			if first {
				<-release // the first list is under way while the others ask
			}
			return false, nil, nil
		})
		names := append(slices.Sorted(maps.Keys(want)), "r-shard-absent")
		firsts := make([]LeaseEvent, len(names))
		var wg sync.WaitGroup
		open := func(i int) {
			wg.Go(func() {
				events, err := g.Store(names[i]).Watch(ctx)
				if err != nil {
					t.Errorf("%s: %v", names[i], err)
					return
				}
				firsts[i] = <-events
			})
		}
		open(0)
		synctest.Wait() // its list is under way
		for i := 1; i < len(names); i++ {
			open(i)
		}
		synctest.Wait() // every other watch waits for the next list
		close(release)
		wg.Wait()
		for i, name := range names {
			w, ok := want[name]
			switch {
			case !ok && !firsts[i].Deleted:
				t.Errorf("%s: first event %+v, want the absence", name, firsts[i])
			case ok && firsts[i].Record != w:
				t.Errorf("%s: first event %+v, want %+v", name, firsts[i].Record, w)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if byLabel != 2 || byName != 2 {
			t.Errorf("%d lists by label and %d by name for %d watches opened at once, want 2 and 2 (the unlabelled and the absent Lease)",
				byLabel, byName, len(names))
		}
	})
}

// listerKey marks the context of a shared list's caller, for listingLeases.
type listerKey struct{}

// listingLeases is a LeaseInterface whose List reports the caller (listerKey) that
// runs it on running and waits for proceed; a List whose context ended meanwhile
// fails with the context's error, as a real client's does.
type listingLeases struct {
	coordinationv1client.LeaseInterface
	running chan string
	proceed chan struct{}
}

func (l listingLeases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if who, ok := ctx.Value(listerKey{}).(string); ok {
		l.running <- who
		<-l.proceed
	}
	list, err := l.LeaseInterface.List(ctx, opts)
	if err == nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return list, err
}

// TestKubernetesLeaseGroupSharedListAbandoned: when the caller running a shared list
// gives up (its context ends), the others that shared it list again and get the
// Lease's state; the one that gave up gets its context's error.
func TestKubernetesLeaseGroupSharedListAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := versionedClientset()
		seed, _ := NewKubernetesLeaseGroup(cs, "ns", "ring", "r")
		r, err := seed.Store("r-shard-0").Create(ctx, LeaseRecord{HolderIdentity: "h", LeaseDuration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		leases := listingLeases{LeaseInterface: cs.CoordinationV1().Leases("ns"), running: make(chan string), proceed: make(chan struct{})}
		g, _ := NewKubernetesLeaseGroup(cs, "ns", "ring", "r")
		g.leases = leases
		ctxs, cancels, results := map[string]context.Context{}, map[string]context.CancelFunc{}, map[string]error{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		list := func(who string) {
			c, stop := context.WithCancel(context.WithValue(ctx, listerKey{}, who))
			ctxs[who], cancels[who] = c, stop
			wg.Go(func() {
				b, err := g.listed(c)
				if err == nil && b.leases["r-shard-0"].ResourceVersion != r.ResourceVersion {
					err = fmt.Errorf("listed version %s, want %s", b.leases["r-shard-0"].ResourceVersion, r.ResourceVersion)
				}
				mu.Lock()
				results[who] = err
				mu.Unlock()
			})
		}
		list("c")
		if who := <-leases.running; who != "c" {
			t.Fatalf("%s runs the first list, want c", who)
		}
		list("a")
		list("b")
		synctest.Wait() // a and b share the next list
		leases.proceed <- struct{}{}
		runner := <-leases.running // a or b runs the next list
		other := map[string]string{"a": "b", "b": "a"}[runner]
		cancels[runner]()
		leases.proceed <- struct{}{}
		if who := <-leases.running; who != other {
			t.Fatalf("%s runs the list after %s gave up, want %s", who, runner, other)
		}
		leases.proceed <- struct{}{}
		wg.Wait()
		for _, stop := range cancels {
			stop()
		}
		if results["c"] != nil || results[other] != nil {
			t.Fatalf("c: %v, %s: %v; want both listed", results["c"], other, results[other])
		}
		if !errors.Is(results[runner], context.Canceled) {
			t.Fatalf("%s (gave up): %v, want context.Canceled", runner, results[runner])
		}
	})
}
