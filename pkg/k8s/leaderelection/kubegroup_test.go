package leaderelection

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
