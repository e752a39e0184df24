package discovery_test

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/events"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// await returns the next event; the API server is real, so this cannot run
// in a bubble, and the bound is generous for a loaded machine.
func await(t *testing.T, ch <-chan busevents.Event) *events.HAProxyPodsDiscoveredEvent {
	t.Helper()
	select {
	case e := <-ch:
		return e.(*events.HAProxyPodsDiscoveredEvent)
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
		return nil
	}
}

func createPod(t *testing.T, cs kubernetes.Interface, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: "haproxy", Image: "haproxy:3.2"}},
			AutomountServiceAccountToken: new(bool),
		},
	}
	p, err := cs.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return p
}

// setStatus plays the kubelet: it gives the pod an IP and a Ready condition.
func setStatus(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, ip string, ready bool) *corev1.Pod {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	p, err := cs.CoreV1().Pods("default").UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status of %s: %v", p.Name, err)
	}
	return p
}

func TestCluster(t *testing.T) {
	env := batontest.StartEnv(t)
	cs := env.Clientset()
	haproxy := map[string]string{"app": "haproxy"}
	a := createPod(t, cs, "haproxy-a", haproxy)
	other := createPod(t, cs, "other", map[string]string{"app": "web"})

	r := newRig(t, func(bus *busevents.EventBus) (*discovery.Discovery, error) {
		return discovery.NewCluster(bus, cs, "default", "app=haproxy", discovery.Options{Logger: discard})
	})
	r.run(t)
	e := await(t, r.ch)
	// The generation is the resourceVersion the informer had listed at: at
	// least that of every object created before it started.
	if e.Generation < rv(t, other) || names(e.Pods) != "default/haproxy-a-" || e.Pods[0].IP != "" {
		t.Fatalf("first event: generation %d (want >= %d) pods %s %+v", e.Generation, rv(t, other), names(e.Pods), e.Pods)
	}
	if !r.d.Synced() {
		t.Error("not Synced after the informer synced")
	}

	a = setStatus(t, cs, a, "10.1.0.5", true)
	first := e.Generation
	e = await(t, r.ch)
	if e.Generation < rv(t, a) || e.Generation <= first || names(e.Pods) != "default/haproxy-a+" || e.Pods[0].IP != "10.1.0.5" {
		t.Errorf("after ready: generation %d (want >= %d, > %d) pods %+v", e.Generation, rv(t, a), first, e.Pods)
	}

	// A second replica, started now, publishes the same set with a
	// generation no lower than the first one's: generations agree across
	// replicas and never go back when another replica leads.
	r2 := newRig(t, func(bus *busevents.EventBus) (*discovery.Discovery, error) {
		return discovery.NewCluster(bus, cs, "default", "app=haproxy", discovery.Options{Logger: discard})
	})
	r2.run(t)
	if e2 := await(t, r2.ch); names(e2.Pods) != names(e.Pods) || e2.Generation < e.Generation {
		t.Errorf("second replica: generation %d pods %s, after the first's %d %s", e2.Generation, names(e2.Pods), e.Generation, names(e.Pods))
	}

	b := createPod(t, cs, "haproxy-b", haproxy)
	setStatus(t, cs, b, "10.1.0.6", false)
	// The create and the status update may coalesce; wait for the newest set.
	for e = await(t, r.ch); names(e.Pods) != "default/haproxy-a+,default/haproxy-b-" || e.Pods[1].IP == ""; e = await(t, r.ch) {
	}

	// A pod of another label changing publishes nothing; deleting a selected
	// one does.
	if err := cs.CoreV1().Pods("default").Delete(t.Context(), "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("default").Delete(t.Context(), a.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	last := e.Generation
	for e = await(t, r.ch); names(e.Pods) != "default/haproxy-b-"; e = await(t, r.ch) {
		if len(e.Pods) != 2 {
			t.Fatalf("unexpected set %s", names(e.Pods))
		}
	}
	if e.Generation <= last {
		t.Errorf("generation %d after %d", e.Generation, last)
	}
	if cur, _ := r.d.Current(); cur != e {
		t.Error("Current is not the last event")
	}
}

// rv is p's resourceVersion as a number.
func rv(t *testing.T, p *corev1.Pod) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(p.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", p.ResourceVersion, err)
	}
	return v
}
