package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/fence"
	"github.com/baton-dev/baton/pkg/termctx"
)

// fenceWriter is the user the fenced writers of these tests write as (impersonated),
// so that the policy fences their writes and not the test's own.
const fenceWriter = "baton-fence-writer"

// gate is a client whose writes of one kind are held in flight until released: what a
// leader cut off from the API server, whose requests are delivered late, sends.
type gate struct {
	client.Client
	mu      sync.Mutex
	op      string        // the operation held: "Create", "Update", "Patch", "Delete", "Apply"; "" none
	arrived chan struct{} // closed when the held write arrived
	release chan struct{} // closed to send it
}

// holdNext holds the next write of op.
func (g *gate) holdNext(op string) (arrived, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.op, g.arrived, g.release = op, make(chan struct{}), make(chan struct{})
	return g.arrived, g.release
}

// wait holds a write of op, if it is the one to hold, and returns the context to send
// it under: a held write is on the wire already, so the end of its context no longer
// stops it.
func (g *gate) wait(ctx context.Context, op string) context.Context {
	g.mu.Lock()
	if g.op != op {
		g.mu.Unlock()
		return ctx
	}
	arrived, release := g.arrived, g.release
	g.op = ""
	g.mu.Unlock()
	close(arrived)
	<-release
	return context.WithoutCancel(ctx)
}

func (g *gate) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	ctx = g.wait(ctx, "Create")
	return g.Client.Create(ctx, obj, opts...)
}

func (g *gate) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	ctx = g.wait(ctx, "Update")
	return g.Client.Update(ctx, obj, opts...)
}

func (g *gate) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	ctx = g.wait(ctx, "Patch")
	return g.Client.Patch(ctx, obj, patch, opts...)
}

func (g *gate) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	ctx = g.wait(ctx, "Delete")
	return g.Client.Delete(ctx, obj, opts...)
}

func (g *gate) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	ctx = g.wait(ctx, "Apply")
	return g.Client.Apply(ctx, obj, opts...)
}

// fenceEnv is a namespace whose ConfigMaps the API server's fence guards against the
// Lease "fence" in it, for writes of fenceWriter.
type fenceEnv struct {
	t      *testing.T
	raw    client.Client // the test's own client, not fenced
	writer client.Client // fenceWriter's client
	ns     string
	acq    time.Time // the last acquireTime written
}

func newFenceEnv(t *testing.T) *fenceEnv {
	t.Helper()
	e := &fenceEnv{t: t, raw: newClient(t)}
	e.ns = newNamespace(t, e.raw)
	cfg := shared.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: fenceWriter, Groups: []string{"system:masters"}}
	var err error
	if e.writer, err = client.New(cfg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	e.setHolder("a")
	policy, binding, err := NewAdmissionFence(AdmissionFence{
		Name: "baton-fence-" + e.ns, LeaseName: "fence", LeaseNamespace: e.ns, Users: []string{fenceWriter},
		Resources:         []schema.GroupResource{{Resource: "configmaps"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.raw.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	if err := e.raw.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.raw.Delete(context.Background(), binding)
		_ = e.raw.Delete(context.Background(), policy)
	})
	// The policy takes effect a few hundred milliseconds after it is created.
	took := e.waitRefused(e.token("nobody"), 20*time.Second)
	t.Logf("the policy took effect %v after it was created", took)
	// Writes that carry no token are not judged.
	if e.probe(stamps{TermAnnotation: "1"}) {
		t.Fatal("the fence refused a write without the Lease token")
	}
	return e
}

// setHolder writes holder into the Lease with a new acquireTime, as an acquisition
// does, and returns when the API server answered.
func (e *fenceEnv) setHolder(holder string) {
	e.t.Helper()
	e.setHolderOf("fence", holder)
}

// setHolderOf is setHolder of the Lease name.
func (e *fenceEnv) setHolderOf(name, holder string) {
	e.t.Helper()
	ctx := context.Background()
	leases := shared.Clientset().CoordinationV1().Leases(e.ns)
	e.acq = time.Now().Truncate(time.Microsecond)
	spec := coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](15),
		AcquireTime: &metav1.MicroTime{Time: e.acq}, RenewTime: &metav1.MicroTime{Time: e.acq}}
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: spec}, metav1.CreateOptions{})
	case err == nil:
		l.Spec = spec
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// token returns the stamps of holder's term in the Lease as it is now.
func (e *fenceEnv) token(holder string) stamps {
	return stamps{HolderAnnotation: holder, AcquiredAnnotation: formatMicro(metav1.MicroTime{Time: e.acq}), FenceLabel: "fence"}
}

// probe sends a dry-run Create of a ConfigMap stamped with s as fenceWriter and
// reports whether the fence refused it.
func (e *fenceEnv) probe(s stamps) bool {
	e.t.Helper()
	cm := configMap(e.ns, "probe")
	s.stamp(cm)
	err := e.writer.Create(context.Background(), cm, client.DryRunAll)
	if err != nil && !isFenceDenial(err) {
		e.t.Fatalf("probe: %v", err)
	}
	return err != nil
}

// waitRefused waits until the fence refuses writes stamped with s, and returns how long
// that took.
func (e *fenceEnv) waitRefused(s stamps, limit time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	for !e.probe(s) {
		if time.Since(start) > limit {
			e.t.Fatalf("the fence still passes %v after %v", s, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// waitPassed waits until the fence passes writes stamped with s.
func (e *fenceEnv) waitPassed(s stamps) {
	e.t.Helper()
	start := time.Now()
	for e.probe(s) {
		if time.Since(start) > 20*time.Second {
			e.t.Fatalf("the fence still refuses %v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// fenced returns a fenced client of holder in a term of its own, writing through c,
// with the API server's fence on.
func (e *fenceEnv) fenced(c client.Client, holder string, term uint64) (client.Client, context.Context, func()) {
	ctx, end := fakeTerm(term)
	f := &fencedClient{Client: c, reader: e.raw, refused: &atomic.Uint64{}, logger: slog.Default(),
		leases: onLease(&leaseReader{cs: shared.Clientset(), namespace: e.ns, name: "fence", identity: holder, admission: true})}
	return f, ctx, end
}

// staleWrite is one kind of write a fenced writer cut off from the API server can have
// in flight.
type staleWrite struct {
	name string
	op   string // the write held in flight
	// write is the stale write, by a's fenced client under a's term; the ConfigMap
	// it writes exists, written by a in its term.
	write func(f client.Client, ctx context.Context) error
	gone  bool // the object does not exist before the write
}

// staleWrites returns each kind of write to the ConfigMap ns/name, reading it with raw.
func staleWrites(raw client.Client, ns, name string) []staleWrite {
	return []staleWrite{
		{name: "update", op: "Update", write: func(f client.Client, ctx context.Context) error {
			var cm corev1.ConfigMap
			if err := raw.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
				return err
			}
			cm.Data["k"] = "stale"
			return f.Update(ctx, &cm)
		}},
		{name: "create of a deleted object", op: "Create", gone: true, write: func(f client.Client, ctx context.Context) error {
			cm := configMap(ns, name)
			cm.Data["k"] = "stale"
			return f.Create(ctx, cm)
		}},
		{name: "delete by name", op: "Delete", write: func(f client.Client, ctx context.Context) error {
			return f.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}},
		{name: "raw merge patch", op: "Patch", write: func(f client.Client, ctx context.Context) error {
			return f.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"stale"}}`)))
		}},
		{name: "JSON patch", op: "Patch", write: func(f client.Client, ctx context.Context) error {
			return f.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/data/k","value":"stale"}]`)))
		}},
		{name: "strategic merge patch", op: "Patch", write: func(f client.Client, ctx context.Context) error {
			return f.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				client.RawPatch(types.StrategicMergePatchType, []byte(`{"data":{"k":"stale"}}`)))
		}},
		{name: "apply", op: "Apply", write: func(f client.Client, ctx context.Context) error {
			return f.Apply(ctx, corev1ac.ConfigMap(name, ns).WithData(map[string]string{"k": "stale"}),
				client.FieldOwner("fence-test"), client.ForceOwnership)
		}},
	}
}

// TestAdmissionFenceRefusesStaleWrites: each kind of stale write a leader cut off from
// the API server can have in flight, sent after the Lease passed to another replica, is
// refused by the API server itself (HTTP 403 from the policy), with none of the
// client's own checks or preconditions in the way: the object was not written since.
func TestAdmissionFenceRefusesStaleWrites(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	cases := staleWrites(e.raw, e.ns, "obj")
	term := uint64(10)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			if err := e.raw.Delete(ctx, configMap(e.ns, "obj")); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			// a leads; its fence lets it write.
			e.setHolder("a")
			e.waitPassed(e.token("a"))
			g := &gate{Client: e.writer}
			term++
			fa, actx, endA := e.fenced(g, "a", term)
			defer endA()
			if err := fa.Create(actx, configMap(e.ns, "obj")); err != nil {
				t.Fatalf("a's create in its term: %v", err)
			}
			if tc.gone {
				if err := fa.Delete(actx, configMap(e.ns, "obj")); err != nil {
					t.Fatalf("a's delete in its term: %v", err)
				}
			}
			// a's write is held in flight; b takes the Lease.
			arrived, release := g.holdNext(tc.op)
			errc := make(chan error, 1)
			go func() { errc <- tc.write(fa, actx) }()
			select {
			case <-arrived:
			case err := <-errc:
				t.Fatalf("the write was not held: %v", err)
			}
			old := e.token("a")
			e.setHolder("b")
			lag := e.waitRefused(old, 20*time.Second)
			t.Logf("the fence refused a's term %v after the Lease changed hands", lag)
			endA() // a's term ended by its clock; the write is already on its way
			close(release)
			err := <-errc
			if !isFenceDenial(err) {
				t.Fatalf("a's stale %s: %v, want the API server's fence to refuse it", tc.name, err)
			}
			var cm corev1.ConfigMap
			err = e.raw.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "obj"}, &cm)
			switch {
			case tc.gone && !apierrors.IsNotFound(err):
				t.Fatalf("the object after a's refused create: %v %v, want none", cm.Data, err)
			case !tc.gone && (err != nil || cm.Data["k"] != "v"):
				t.Fatalf("the object after a's refused write: %v %v, want it as a wrote it", cm.Data, err)
			}
			// The same write by b, the new leader, goes through: the stamps of each kind
			// of write are those the fence wants.
			term++
			fb, bctx, endB := e.fenced(e.writer, "b", term)
			defer endB()
			if err := tc.write(fb, bctx); err != nil {
				t.Fatalf("b's %s: %v", tc.name, err)
			}
			err = e.raw.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "obj"}, &cm)
			switch {
			case tc.op == "Delete" && !apierrors.IsNotFound(err):
				t.Fatalf("the object after b's delete: %v %v, want none", cm.Data, err)
			case tc.op != "Delete" && (err != nil || cm.Data["k"] != "stale" || !e.token("b").carried(&cm)):
				t.Fatalf("the object after b's write: %v %v %v, want b's, stamped with b's term", cm.Data, cm.Annotations, err)
			}
		})
	}
	// DeleteAllOf: a's, after the Lease passed to b, is refused object by object (its
	// stamp before each delete is); b's deletes every object, stamping each first.
	t.Run("DeleteAllOf", func(t *testing.T) {
		e.t = t
		e.setHolder("b")
		e.waitPassed(e.token("b"))
		term++
		fb, bctx, endB := e.fenced(e.writer, "b", term)
		defer endB()
		for i := range 2 {
			cm := configMap(e.ns, fmt.Sprint("all-", i))
			cm.Labels = map[string]string{"set": "all"}
			if err := e.raw.Create(ctx, cm); err != nil { // written by no term
				t.Fatal(err)
			}
		}
		fa, actx, endA := e.fenced(e.writer, "a", term-1)
		defer endA()
		// a's term began while it held the Lease: its token is the one it read then.
		fa.(*fencedClient).leases(termctx.Term{}).keep(term-1, fence.Token{Holder: "a", Acquired: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
		err := fa.DeleteAllOf(actx, &corev1.ConfigMap{}, client.InNamespace(e.ns), client.MatchingLabels{"set": "all"})
		if !isFenceDenial(firstJoined(err)) {
			t.Fatalf("a's stale DeleteAllOf: %v, want the API server's fence to refuse it", err)
		}
		var list corev1.ConfigMapList
		if err := e.raw.List(ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{"set": "all"}); err != nil || len(list.Items) != 2 {
			t.Fatalf("after a's refused DeleteAllOf: %d objects, %v; want both", len(list.Items), err)
		}
		if err := fb.DeleteAllOf(bctx, &corev1.ConfigMap{}, client.InNamespace(e.ns), client.MatchingLabels{"set": "all"}); err != nil {
			t.Fatalf("b's DeleteAllOf: %v", err)
		}
		if err := e.raw.List(ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{"set": "all"}); err != nil || len(list.Items) != 0 {
			t.Fatalf("after b's DeleteAllOf: %d objects, %v; want none", len(list.Items), err)
		}
	})
}

// firstJoined returns the first error joined in err (errors.Join), or err.
func firstJoined(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		return j.Unwrap()[0]
	}
	return err
}

// TestAdmissionFenceWindow measures how long after the Lease changed hands the API
// server's fence still passes the old holder's writes (the window it leaves), and
// that the new holder's first write goes through at once (the client sends again
// while the API server's view lags). BATON_FENCE_WINDOW_TRIALS=<n> (default 10).
func TestAdmissionFenceWindow(t *testing.T) {
	trials := 10
	if v := os.Getenv("BATON_FENCE_WINDOW_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BATON_FENCE_WINDOW_TRIALS=%q: want a number of trials", v)
		}
		trials = n
	}
	e := newFenceEnv(t)
	holders := []string{"a", "b"}
	var lags []time.Duration
	resent := 0
	term := uint64(100)
	for i := range 2 * trials {
		old := e.token(holders[i%2])
		next := holders[(i+1)%2]
		e.setHolder(next)
		if i%2 == 0 {
			lags = append(lags, e.waitRefused(old, 20*time.Second))
			continue
		}
		// The new holder writes as soon as the Lease is its own.
		term++
		counter := &countingClient{Client: e.writer}
		f, ctx, end := e.fenced(counter, next, term)
		err := f.Create(ctx, configMap(e.ns, fmt.Sprint("w-", i)))
		end()
		if err != nil {
			t.Fatalf("trial %d: the new holder's first write: %v", i, err)
		}
		resent += int(counter.creates.Load()) - 1
	}
	slices.Sort(lags)
	t.Logf("the old holder's writes passed the fence for: median %v, max %v over %d hand-overs "+
		"(from the Lease update's answer, probed about every millisecond); the new holder's first write was sent again %d times over %d hand-overs",
		lags[len(lags)/2], lags[len(lags)-1], len(lags), resent, trials)
	if max := lags[len(lags)-1]; max > 5*time.Second {
		t.Fatalf("the fence lagged the Lease by %v", max)
	}
}

// countingClient counts Create calls.
type countingClient struct {
	client.Client
	creates atomic.Int64
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.creates.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

// TestNewAdmissionFenceRefusesBadInput: each missing field is named.
func TestNewAdmissionFenceRefusesBadInput(t *testing.T) {
	good := AdmissionFence{Name: "n", LeaseName: "l", LeaseNamespace: "ns", Users: []string{"u"},
		Resources: []schema.GroupResource{{Resource: "configmaps"}}}
	for field, mod := range map[string]func(*AdmissionFence){
		"Name":           func(f *AdmissionFence) { f.Name = "" },
		"LeaseName":      func(f *AdmissionFence) { f.LeaseName = "" },
		"LeaseNamespace": func(f *AdmissionFence) { f.LeaseNamespace = "" },
		"Users":          func(f *AdmissionFence) { f.Users = nil },
		"Users[0]":       func(f *AdmissionFence) { f.Users = []string{"o'brien"} },
		"Resources":      func(f *AdmissionFence) { f.Resources = nil },
		"Resources[0]":   func(f *AdmissionFence) { f.Resources = []schema.GroupResource{{Resource: "pods/status"}} },
	} {
		f := good
		mod(&f)
		if _, _, err := NewAdmissionFence(f); !errors.Is(err, ErrInvalidOptions) || !containsField(err, field) {
			t.Errorf("bad %s: %v, want ErrInvalidOptions naming it", field, err)
		}
	}
	if _, _, err := NewAdmissionFence(good); err != nil {
		t.Fatal(err)
	}
}

func containsField(err error, field string) bool {
	return err != nil && strings.Contains(err.Error(), "AdmissionFence."+field)
}

// TestRuntimeWritesThroughTheAdmissionFence: a Runtime with ServerSideFence, on its real
// elector, stamps the Lease token of its term, and its writes pass the API server's
// fence: create, update, patch, delete by name.
func TestRuntimeWritesThroughTheAdmissionFence(t *testing.T) {
	raw := newClient(t)
	ns := newNamespace(t, raw)
	ctx := context.Background()
	policy, binding, err := NewAdmissionFence(AdmissionFence{
		Name: "baton-fence-" + ns, LeaseName: "e2e-fence", LeaseNamespace: ns, Users: []string{fenceWriter},
		Resources:         []schema.GroupResource{{Resource: "configmaps"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{policy, binding} {
		if err := raw.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Delete(context.Background(), o) })
	}
	cfg := shared.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: fenceWriter, Groups: []string{"system:masters"}}
	writer, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A released Lease (no holder), for the policy's parameter before the election.
	if err := raw.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-fence"}}); err != nil {
		t.Fatal(err)
	}
	// Wait for the policy: a write with a token of no term is refused.
	waitForPolicy(t, func() bool {
		cm := configMap(ns, "probe")
		stamps{HolderAnnotation: "nobody", AcquiredAnnotation: "2000-01-01T00:00:00.000000Z", FenceLabel: "e2e-fence"}.stamp(cm)
		return isFenceDenial(writer.Create(ctx, cm, client.DryRunAll))
	})

	mgr, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{mgr: mgr, registry: prometheus.NewRegistry(), done: make(chan error, 1)}
	n.rt, err = New(mgr, Options{LeaderElectionID: "e2e-fence", LeaderElectionNamespace: ns, Identity: "fenced-1",
		LeaseDuration: &testLease, RenewDeadline: &testRenew, RetryPeriod: &testRetry,
		Clientset: shared.Clientset(), MetricsRegisterer: n.registry, ServerSideFence: true})
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan error, 1)
	err = n.rt.AddLeaderOnly("writer", func(ctx context.Context) error {
		Subscribed(ctx)
		fc := n.rt.FencedClient(nil)
		err := func() error {
			if err := fc.Create(ctx, configMap(ns, "gone")); err != nil {
				return fmt.Errorf("create: %w", err)
			}
			if err := fc.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}},
				client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/data/k","value":"patched"}]`))); err != nil {
				return fmt.Errorf("JSON patch: %w", err)
			}
			if err := fc.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}); err != nil {
				return fmt.Errorf("delete by name: %w", err)
			}
			kept := configMap(ns, "kept")
			if err := fc.Create(ctx, kept); err != nil {
				return fmt.Errorf("create: %w", err)
			}
			kept.Data["k"] = "updated"
			if err := fc.Update(ctx, kept); err != nil {
				return fmt.Errorf("update: %w", err)
			}
			return nil
		}()
		result <- err
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n.start(t)
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("the leader's fenced writes: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader wrote nothing")
	}
	lease, err := shared.Clientset().CoordinationV1().Leases(ns).Get(ctx, "e2e-fence", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := raw.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, &cm); err != nil {
		t.Fatal(err)
	}
	want := stamps{HolderAnnotation: "fenced-1", AcquiredAnnotation: formatMicro(*lease.Spec.AcquireTime), FenceLabel: "e2e-fence"}
	if !want.carried(&cm) || cm.Data["k"] != "updated" {
		t.Fatalf("the leader's object: %v %v, want its update stamped with %v", cm.Annotations, cm.Data, want)
	}
	if err := raw.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, &cm); !apierrors.IsNotFound(err) {
		t.Fatalf("the object deleted by name: %v", err)
	}
}

// waitForPolicy polls ready every few milliseconds for up to 20s.
func waitForPolicy(t *testing.T, ready func() bool) {
	t.Helper()
	batontest.WaitFor(t, 20*time.Second, "the admission policy to take effect", ready)
}

// TestDeployedAdmissionFence: deploy/admission-fence.yaml is NewAdmissionFence's policy
// and binding and NewLeaseGuard's for deploy/'s Lease, ServiceAccount and namespace.
func TestDeployedAdmissionFence(t *testing.T) {
	wantPolicy, wantBinding, err := NewAdmissionFence(AdmissionFence{
		Name: "baton-fence", LeaseName: "baton-leader", LeaseNamespace: "baton",
		Users:             []string{"system:serviceaccount:baton:baton"},
		Resources:         []schema.GroupResource{{Resource: "configmaps"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "baton"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantGuard, wantGuardBinding, err := NewLeaseGuard(LeaseGuard{Name: "baton-fence-lease", Namespace: "baton", Leases: []string{"baton-leader"}})
	if err != nil {
		t.Fatal(err)
	}
	policy, guard, binding, guardBinding := deployedFence(t)
	for i, pair := range [][2]any{{policy, wantPolicy}, {binding, wantBinding}, {guard, wantGuard}, {guardBinding, wantGuardBinding}} {
		if !equality.Semantic.DeepEqual(pair[0], pair[1]) {
			want, _ := yaml.Marshal(pair[1])
			t.Errorf("document %d of deploy/admission-fence.yaml differs from NewAdmissionFence's and NewLeaseGuard's output; regenerate it:\n%s", i+1, want)
		}
	}
}
