package app_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/config"
)

// heldLists holds back every read of pods through it (list or watch, which
// an informer may use to list) until opened, as an API server too slow to
// answer would.
type heldLists struct {
	next http.RoundTripper
	once sync.Once
	open chan struct{}
}

func (h *heldLists) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") {
		select {
		case <-h.open:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return h.next.RoundTrip(req)
}

func (h *heldLists) release() { h.once.Do(func() { close(h.open) }) }

// TestClusterReplicaCampaignsOnlyWithState runs two cluster replicas
// against a real API server. Replica a's pod list is held back, so its
// Discovery has not synced: it must not write the Lease, while b, started
// after it with nothing held back, leads. Once a's list is answered it
// campaigns, and takes over when b leaves.
func TestClusterReplicaCampaignsOnlyWithState(t *testing.T) {
	env := batontest.StartEnv(t)
	admin := env.Clientset()
	ctx := t.Context()
	const ns = "default"

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: app.DefaultConfigName}, Data: map[string]string{"config.yaml": config.DefaultYAML}}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := &heldLists{open: make(chan struct{})}
	defer held.release()
	cfgA := env.Config()
	cfgA.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { held.next = rt; return held }
	csA, err := kubernetes.NewForConfig(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	start := func(id string, cs kubernetes.Interface) (*app.Replica, func()) {
		t.Helper()
		o, err := app.Cluster(app.ClusterConfig{
			Clientset: cs, Identity: id, Namespace: ns, PodSelector: "app=haproxy",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 400 * time.Millisecond,
			ReleaseOnCancel: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		o.Logger, o.ProcessMetrics = discard, false
		r, err := app.New(o)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(runCtx) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("%s: Run = %v", id, err)
				}
			})
		}
		t.Cleanup(stop)
		return r, stop
	}
	holder := func() string {
		l, err := admin.CoordinationV1().Leases(ns).Get(ctx, app.DefaultLeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		if err != nil {
			t.Fatalf("get lease: %v", err)
		}
		return holderOf(l)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	a, _ := start("replica-a", csA)
	waitFor("a's configuration", func() bool { _, ok := a.ConfigHandler().Current(); return ok })
	time.Sleep(3 * time.Second) // longer than a lease: a would have taken it
	if h := holder(); h != "" || a.Manager().Status().Terms != 0 || !a.Manager().Status().CampaignWaiting {
		t.Fatalf("replica a, its pods not listed yet, holds the lease (holder %q, terms %d)", h, a.Manager().Status().Terms)
	}
	_, stopB := start("replica-b", admin)
	waitFor("b to lead", func() bool { return holder() == "replica-b" })

	held.release()
	waitFor("a to campaign", func() bool { return !a.Manager().Status().CampaignWaiting })
	if h := holder(); h != "replica-b" {
		t.Fatalf("holder %q after a synced, want b still", h)
	}
	stopB() // releases the lease
	waitFor("a to lead", func() bool { st := a.Manager().Status(); return st.Leading && st.TermReady })
	if h := holder(); h != "replica-a" {
		t.Errorf("holder %q, want replica-a", h)
	}
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
