package incarnation_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
)

// TestWatcher plays a kubelet on a fake clientset: statuses that prove nothing (the
// container running, another incarnation's end, a deletion timestamp, the pod force
// deleted and re-created with another UID) leave the channel open; the terminated
// state with the nonce closes it.
func TestWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p := pod("baton", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
		cs := fake.NewClientset(p)
		w, err := incarnation.NewWatcher(cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Wait()
		dead := w.Dead(ctx, inc.String())
		pods := cs.CoreV1().Pods(inc.PodNamespace)
		isOpen := func(step string) {
			t.Helper()
			synctest.Wait()
			select {
			case <-dead:
				t.Fatalf("%s: taken as proof of death", step)
			default:
			}
		}
		isOpen("running")
		update := func(mut func(p *corev1.Pod)) {
			t.Helper()
			cur, err := pods.Get(ctx, inc.PodName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mut(cur)
			if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		update(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: terminated("baton-incarnation:" + otherNonce)}
		})
		isOpen("an older incarnation's end")
		update(func(p *corev1.Pod) {
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.Status.Phase = corev1.PodUnknown
		})
		isOpen("deletion timestamp, phase Unknown")
		if err := pods.Delete(ctx, inc.PodName, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		isOpen("force delete")
		again := pod("baton", corev1.ContainerState{Terminated: terminated(inc.TerminationLine())}, corev1.ContainerState{})
		again.UID = "0b7a3c2e-0000-4000-8000-0000000000aa"
		if _, err := pods.Create(ctx, again, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		isOpen("a pod of the same name with another UID")
		if err := pods.Delete(ctx, inc.PodName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The kubelet of the force-deleted pod reports late; here the status is put
		// back, as an API server would show a pod only by its UID.
		back := pod("baton", corev1.ContainerState{Terminated: terminated(inc.TerminationLine())}, corev1.ContainerState{})
		if _, err := pods.Create(ctx, back, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-dead:
		case <-time.After(time.Minute):
			t.Fatal("the terminated state with the nonce was not taken as proof")
		}
	})
}

func TestWatcherIgnoresABadIncarnation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, err := incarnation.NewWatcher(fake.NewClientset(), nil)
		if err != nil {
			t.Fatal(err)
		}
		dead := w.Dead(t.Context(), "not/an/incarnation")
		synctest.Wait()
		select {
		case <-dead:
			t.Fatal("a bad incarnation was taken as dead")
		default:
		}
		w.Wait()
	})
}

// TestWatcherBacksOffOnErrors: a List that fails (RBAC missing) is retried after 1s,
// 2s, 4s, ... up to 30s, not every second.
func TestWatcherBacksOffOnErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		var lists []time.Time
		cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			lists = append(lists, time.Now())
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no grant"))
		})
		w, err := incarnation.NewWatcher(cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		w.Dead(ctx, inc.String())
		time.Sleep(2 * time.Minute)
		cancel()
		w.Wait()
		var gaps []time.Duration
		for i := 1; i < len(lists); i++ {
			gaps = append(gaps, lists[i].Sub(lists[i-1]))
		}
		want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
		for i := range want {
			want[i] *= time.Second
		}
		if !slices.Equal(gaps[:min(len(gaps), len(want))], want) {
			t.Fatalf("pauses between lists %v, want %v first", gaps, want)
		}
	})
}
