package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// fenceRing is the ring of the sharded fence tests: two shards, whose Leases are in
// the test's namespace.
const fenceRing = "ring"

// shardFenceEnv is a namespace whose ConfigMaps the API server's fence of the ring
// fenceRing guards, for writes of fenceWriter. Its probes (probe, waitRefused,
// waitPassed) are fenceEnv's.
type shardFenceEnv struct {
	fenceEnv
	acquired map[int]time.Time // the last acquireTime written to each shard's Lease
}

func newShardFenceEnv(t *testing.T) *shardFenceEnv {
	t.Helper()
	return newShardFenceEnvOf(t, 2)
}

// newShardFenceEnvOf is newShardFenceEnv with a ring of shards shards: shard 0 held by
// "a", shard 1 by "c", shard i above by "h<i>".
func newShardFenceEnvOf(t *testing.T, shards int) *shardFenceEnv {
	t.Helper()
	e := &shardFenceEnv{fenceEnv: fenceEnv{t: t, raw: newClient(t)}, acquired: map[int]time.Time{}}
	e.ns = newNamespace(t, e.raw)
	cfg := shared.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: fenceWriter, Groups: []string{"system:masters"}}
	var err error
	if e.writer, err = client.New(cfg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	for i := range shards {
		e.setShardHolder(i, shardHolder(i))
	}
	policies, bindings, err := NewShardedAdmissionFence(ShardedAdmissionFence{
		Name: "baton-shard-fence-" + e.ns, Ring: fenceRing, Namespace: e.ns, Shards: shards, Users: []string{fenceWriter},
		Resources:         []schema.GroupResource{{Resource: "configmaps"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}},
	})
	if err != nil {
		t.Fatal(err)
	}
	installShardFence(t, e.raw, policies, bindings)
	// Each binding takes effect on its own: wait until every shard's refuses a
	// token its Lease never held (waiting for shard 0's alone let the policy of
	// shards 8-9 of TestShardedAdmissionFenceGroups pass its first stale write).
	var took time.Duration
	for i := range shards {
		took = max(took, e.waitRefused(e.shardToken(i, "nobody"), 20*time.Second))
	}
	t.Logf("the policy took effect %v after it was created", took)
	// Writes naming no shard Lease are not judged: unstamped ones, and a single
	// leader's (NewAdmissionFence judges those).
	if e.probe(stamps{TermAnnotation: "1"}) {
		t.Fatal("the fence refused a write without a shard Lease's token")
	}
	if e.probe(stamps{HolderAnnotation: "nobody", AcquiredAnnotation: "2000-01-01T00:00:00.000000Z"}) {
		t.Fatal("the fence refused a write with the single leader's token")
	}
	return e
}

// installFence creates the policy and its bindings, and deletes them when t ends.
func installFence[B client.Object](t *testing.T, raw client.Client, policy client.Object, bindings []B) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{policy}
	for _, b := range bindings {
		objs = append(objs, b)
	}
	for _, o := range objs {
		if err := raw.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Delete(context.Background(), o) })
	}
}

// shardHolder is the first holder of shard i in newShardFenceEnvOf.
func shardHolder(i int) string {
	switch i {
	case 0:
		return "a"
	case 1:
		return "c"
	}
	return fmt.Sprint("h", i)
}

// installShardFence creates a ring's policies and bindings, and deletes them when t
// ends.
func installShardFence(t *testing.T, raw client.Client, policies []*admissionv1.ValidatingAdmissionPolicy, bindings []*admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	for _, p := range policies[1:] {
		installFence(t, raw, p, []client.Object{})
	}
	installFence(t, raw, policies[0], bindings)
}

// setShardHolder writes holder into shard's Lease with a new acquireTime, as an
// acquisition does (creating the Lease if it does not exist), and returns when the
// API server answered.
func (e *shardFenceEnv) setShardHolder(shard int, holder string) {
	e.t.Helper()
	ctx := context.Background()
	leases := shared.Clientset().CoordinationV1().Leases(e.ns)
	name := sharding.ShardLeaseName(fenceRing, shard)
	acq := time.Now().Truncate(time.Microsecond)
	e.acquired[shard] = acq
	spec := coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](15),
		AcquireTime: &metav1.MicroTime{Time: acq}, RenewTime: &metav1.MicroTime{Time: acq}}
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

// shardToken returns the stamps of holder's term in shard's Lease as it is now.
func (e *shardFenceEnv) shardToken(shard int, holder string) stamps {
	return stamps{ShardLeaseAnnotation: sharding.ShardLeaseName(fenceRing, shard), ShardFenceLabel: sharding.ShardLeaseName(fenceRing, shard), ShardHolderAnnotation: holder,
		ShardAcquiredAnnotation: formatMicro(metav1.MicroTime{Time: e.acquired[shard]})}
}

// shardFenced returns a fenced client of holder in a term of shard, writing through c,
// with the API server's fence on: what a sharded reconcile writes with.
func (e *shardFenceEnv) shardFenced(c client.Client, shard int, holder string, term uint64) (client.Client, context.Context, func()) {
	ctx, end := fakeTerm(term)
	f := &fencedClient{Client: c, reader: e.raw, refused: &atomic.Uint64{}, logger: slog.Default(),
		leases: onLease(&leaseReader{cs: shared.Clientset(), namespace: e.ns,
			name: sharding.ShardLeaseName(fenceRing, shard), identity: holder, admission: true, shard: true})}
	return f, ctx, end
}

// TestShardedAdmissionFenceRefusesStaleWrites: each kind of stale write a shard's
// holder cut off from the API server can have in flight, sent after the shard's Lease
// passed to another replica, is refused by the API server itself (HTTP 403 from the
// policy), with none of the client's own checks or preconditions in the way; the same
// write of the shard's new holder passes, and so does the same write of the other
// shard's holder, whose Lease did not change.
func TestShardedAdmissionFenceRefusesStaleWrites(t *testing.T) {
	e := newShardFenceEnv(t)
	ctx := context.Background()
	term := uint64(10)
	// c holds shard 1 throughout.
	fc, cctx, endC := e.shardFenced(e.writer, 1, "c", 1)
	defer endC()
	for _, tc := range staleWrites(e.raw, e.ns, "obj") {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			other := staleWrites(e.raw, e.ns, "other")
			var otherWrite staleWrite
			for _, o := range other {
				if o.name == tc.name {
					otherWrite = o
				}
			}
			for _, name := range []string{"obj", "other"} {
				if err := e.raw.Delete(ctx, configMap(e.ns, name)); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			// a leads shard 0; its fence lets it write. c writes the object of shard 1.
			e.setShardHolder(0, "a")
			e.waitPassed(e.shardToken(0, "a"))
			g := &gate{Client: e.writer}
			term++
			fa, actx, endA := e.shardFenced(g, 0, "a", term)
			defer endA()
			for _, w := range []struct {
				f    client.Client
				ctx  context.Context
				name string
			}{{fa, actx, "obj"}, {fc, cctx, "other"}} {
				if err := w.f.Create(w.ctx, configMap(e.ns, w.name)); err != nil {
					t.Fatalf("create of %s in its shard's term: %v", w.name, err)
				}
				if tc.gone {
					if err := w.f.Delete(w.ctx, configMap(e.ns, w.name)); err != nil {
						t.Fatalf("delete of %s in its shard's term: %v", w.name, err)
					}
				}
			}
			// a's write is held in flight; b takes shard 0's Lease.
			arrived, release := g.holdNext(tc.op)
			errc := make(chan error, 1)
			go func() { errc <- tc.write(fa, actx) }()
			select {
			case <-arrived:
			case err := <-errc:
				t.Fatalf("the write was not held: %v", err)
			}
			old := e.shardToken(0, "a")
			e.setShardHolder(0, "b")
			lag := e.waitRefused(old, 20*time.Second)
			t.Logf("the fence refused a's shard term %v after the shard's Lease changed hands", lag)
			endA() // a's shard term ended by its clock; the write is already on its way
			close(release)
			err := <-errc
			if !isFenceDenial(err) || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), sharding.ShardLeaseName(fenceRing, 0)) {
				t.Fatalf("a's stale %s: %v, want the API server's fence to refuse it (403), naming shard 0's Lease", tc.name, err)
			}
			var cm corev1.ConfigMap
			err = e.raw.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "obj"}, &cm)
			switch {
			case tc.gone && !apierrors.IsNotFound(err):
				t.Fatalf("the object after a's refused create: %v %v, want none", cm.Data, err)
			case !tc.gone && (err != nil || cm.Data["k"] != "v"):
				t.Fatalf("the object after a's refused write: %v %v, want it as a wrote it", cm.Data, err)
			}
			// The same write by b, shard 0's new holder, goes through: the stamps of
			// each kind of write are those the fence wants.
			term++
			fb, bctx, endB := e.shardFenced(e.writer, 0, "b", term)
			defer endB()
			if err := tc.write(fb, bctx); err != nil {
				t.Fatalf("b's %s: %v", tc.name, err)
			}
			err = e.raw.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "obj"}, &cm)
			switch {
			case tc.op == "Delete" && !apierrors.IsNotFound(err):
				t.Fatalf("the object after b's delete: %v %v, want none", cm.Data, err)
			case tc.op != "Delete" && (err != nil || cm.Data["k"] != "stale" || !e.shardToken(0, "b").carried(&cm)):
				t.Fatalf("the object after b's write: %v %v %v, want b's, stamped with b's shard term", cm.Data, cm.Annotations, err)
			}
			// Shard 1 did not change hands: its holder's write passes.
			if err := otherWrite.write(fc, cctx); err != nil {
				t.Fatalf("c's %s in shard 1, whose Lease did not change: %v", tc.name, err)
			}
		})
	}
}

// TestShardedAdmissionFenceWithoutAShardLease (issue 25, 7): while one shard Lease of
// the ring does not exist, every write to an object marked with it is refused (422),
// anyone's, so a stale write naming a deleted shard Lease never lands, while writes to
// the other shards' objects and to unmarked objects pass (before, every write of the
// controller's user was refused, whichever shard it named); once the Lease is created again, the new holder's writes pass and
// the old token stays refused. A released shard Lease refuses its last term's writes
// and no other shard's.
func TestShardedAdmissionFenceWithoutAShardLease(t *testing.T) {
	e := newShardFenceEnv(t)
	ctx := context.Background()
	e.waitPassed(e.shardToken(0, "a"))
	staleOne, liveZero := e.shardToken(1, "c"), e.shardToken(0, "a")
	e.deleteShardLease(1)
	// The API server answers 422 Invalid: a binding without its parameter is a
	// configuration error, denied by parameterNotFoundAction. Only the objects marked
	// with shard 1's Lease are held, anyone's writes to them.
	shardOne := stamps{ShardFenceLabel: sharding.ShardLeaseName(fenceRing, 1)}
	for what, w := range map[string]struct {
		s    stamps
		by   client.Client
		held bool
	}{
		"the controller's write with the deleted shard's last token": {staleOne, e.writer, true},
		"an administrator's write to an object marked for shard 1":   {shardOne, e.raw, true},
		"the controller's write with shard 0's current token":        {liveZero, e.writer, false},
		"the controller's write with no token":                       {stamps{TermAnnotation: "1"}, e.writer, false},
		"an administrator's write to an unmarked object":             {stamps{}, e.raw, false},
	} {
		cm := configMap(e.ns, "probe")
		w.s.stamp(cm)
		err := w.by.Create(ctx, cm, client.DryRunAll)
		switch {
		case w.held && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "baton-shard-fence-"+e.ns+"-1'")):
			t.Errorf("%s while shard 1's Lease does not exist: %v, want 422 from the binding of shard 1", what, err)
		case !w.held && err != nil:
			t.Errorf("%s while shard 1's Lease does not exist: %v, want it passed", what, err)
		}
	}
	e.setShardHolder(1, "d")
	e.waitPassed(e.shardToken(1, "d"))
	if err := e.writeStamped(staleOne); !isFenceDenial(err) {
		t.Errorf("a write with shard 1's token from before its Lease was deleted: %v, want the fence to refuse it", err)
	}
	if err := e.writeStamped(liveZero); err != nil {
		t.Errorf("a write with shard 0's current token once every shard Lease exists: %v", err)
	}
	// Shard 0's Lease released (no holder, as a graceful hand-over leaves it for a
	// moment): its last term's writes are refused, shard 1's pass.
	e.setShardHolder(0, "")
	e.waitRefused(liveZero, 20*time.Second)
	if err := e.writeStamped(liveZero); !isFenceDenial(err) || !strings.Contains(err.Error(), "has no holder") {
		t.Errorf("a write of shard 0's last term once its Lease was released: %v, want the fence to refuse it, saying the Lease has no holder", err)
	}
	if err := e.writeStamped(e.shardToken(1, "d")); err != nil {
		t.Errorf("a write of shard 1's current term while shard 0's Lease is released: %v", err)
	}
}

// TestShardedAdmissionFenceGroups: in a ring of 10 shards, whose fence is a policy for
// shards 0-7 and one for 8-9, every shard's writes are judged by its own Lease alone,
// whichever policy holds its binding: the current token passes and a stale one is
// refused (403), in both groups; other users' writes to marked objects and anyone's
// to unmarked objects pass. While the last shard's Lease does not exist, every write
// to the objects marked with it is refused (422), anyone's, and the other shards' and
// unmarked objects' pass.
func TestShardedAdmissionFenceGroups(t *testing.T) {
	const shards = 10
	e := newShardFenceEnvOf(t, shards)
	ctx := context.Background()
	last := shards - 1
	e.waitPassed(e.shardToken(last, shardHolder(last)))
	for _, shard := range []int{0, 7, 8, last} {
		if err := e.writeStamped(e.shardToken(shard, shardHolder(shard))); err != nil {
			t.Errorf("shard %d's write with its current token: %v", shard, err)
		}
		// Another shard's holder with this shard's acquireTime: a token the Lease
		// never held.
		if err := e.writeStamped(e.shardToken(shard, shardHolder(shard+1))); !isFenceDenial(err) || !strings.Contains(err.Error(), sharding.ShardLeaseName(fenceRing, shard)) {
			t.Errorf("shard %d's write with a stale token: %v, want the fence to refuse it, naming the shard's Lease", shard, err)
		}
		cm := configMap(e.ns, "probe")
		e.shardToken(shard, "nobody").stamp(cm)
		if err := e.raw.Create(ctx, cm, client.DryRunAll); err != nil {
			t.Errorf("an administrator's write to an object marked for shard %d, with a stale token: %v, want it passed", shard, err)
		}
	}
	e.deleteShardLease(last)
	markedLast := stamps{ShardFenceLabel: sharding.ShardLeaseName(fenceRing, last)}
	for what, w := range map[string]struct {
		s    stamps
		by   client.Client
		held bool
	}{
		"the controller's write with the deleted shard's last token": {e.shardToken(last, shardHolder(last)), e.writer, true},
		"an administrator's write to an object marked for it":        {markedLast, e.raw, true},
		"the controller's write with shard 8's current token":        {e.shardToken(8, shardHolder(8)), e.writer, false},
		"the controller's write with shard 0's current token":        {e.shardToken(0, shardHolder(0)), e.writer, false},
		"the controller's write to an unmarked object":               {stamps{TermAnnotation: "1"}, e.writer, false},
		"an administrator's write to an unmarked object":             {stamps{}, e.raw, false},
	} {
		cm := configMap(e.ns, "probe")
		w.s.stamp(cm)
		err := w.by.Create(ctx, cm, client.DryRunAll)
		switch {
		case w.held && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), fmt.Sprintf("baton-shard-fence-%s-%d'", e.ns, last))):
			t.Errorf("%s while shard %d's Lease does not exist: %v, want 422 from its binding", what, last, err)
		case !w.held && err != nil:
			t.Errorf("%s while shard %d's Lease does not exist: %v, want it passed", what, last, err)
		}
	}
}

// deleteShardLease deletes shard's Lease and waits until the API server's fence
// knows it: the bindings read their parameters from an informer, so a write sent just
// after the delete may still be judged by the deleted Lease.
func (e *shardFenceEnv) deleteShardLease(shard int) {
	e.t.Helper()
	ctx := context.Background()
	if err := shared.Clientset().CoordinationV1().Leases(e.ns).Delete(ctx, sharding.ShardLeaseName(fenceRing, shard), metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	marked := stamps{ShardFenceLabel: sharding.ShardLeaseName(fenceRing, shard)}
	start := time.Now()
	for {
		cm := configMap(e.ns, "probe")
		marked.stamp(cm)
		err := e.raw.Create(ctx, cm, client.DryRunAll)
		if apierrors.IsInvalid(err) {
			return
		}
		if time.Since(start) > 20*time.Second {
			e.t.Fatalf("a write marked for shard %d %v after its Lease was deleted: %v, want 422", shard, time.Since(start), err)
		}
		time.Sleep(time.Millisecond)
	}
}

// writeStamped sends a dry-run Create of a ConfigMap stamped with s as fenceWriter.
func (e *shardFenceEnv) writeStamped(s stamps) error {
	cm := configMap(e.ns, "probe")
	s.stamp(cm)
	return e.writer.Create(context.Background(), cm, client.DryRunAll)
}

// TestNewShardedAdmissionFenceRefusesBadInput: each missing or bad field is named.
func TestNewShardedAdmissionFenceRefusesBadInput(t *testing.T) {
	good := ShardedAdmissionFence{Name: "n", Ring: "r", Namespace: "ns", Users: []string{"u"},
		Resources: []schema.GroupResource{{Resource: "configmaps"}}}
	for field, mod := range map[string]func(*ShardedAdmissionFence){
		"Name":         func(f *ShardedAdmissionFence) { f.Name = "" },
		"Ring":         func(f *ShardedAdmissionFence) { f.Ring = "" },
		"Namespace":    func(f *ShardedAdmissionFence) { f.Namespace = "" },
		"Shards":       func(f *ShardedAdmissionFence) { f.Shards = sharding.MaxShards + 1 },
		"Users":        func(f *ShardedAdmissionFence) { f.Users = nil },
		"Users[0]":     func(f *ShardedAdmissionFence) { f.Users = []string{"o'brien"} },
		"Resources":    func(f *ShardedAdmissionFence) { f.Resources = nil },
		"Resources[0]": func(f *ShardedAdmissionFence) { f.Resources = []schema.GroupResource{{Resource: "pods/status"}} },
	} {
		f := good
		mod(&f)
		if _, _, err := NewShardedAdmissionFence(f); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "ShardedAdmissionFence."+field) {
			t.Errorf("bad %s: %v, want ErrInvalidOptions naming it", field, err)
		}
	}
	_, bindings, err := NewShardedAdmissionFence(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(bindings) != sharding.DefaultShards {
		t.Fatalf("%d bindings for Shards 0, want one per shard of the default %d", len(bindings), sharding.DefaultShards)
	}
	for i, b := range bindings {
		if want := sharding.ShardLeaseName("r", i); b.Spec.ParamRef.Name != want || b.Name != fmt.Sprint("n-", i) {
			t.Errorf("binding %d: %s with parameter %s, want n-%d with %s", i, b.Name, b.Spec.ParamRef.Name, i, want)
		}
	}
}

// TestShardedAdmissionFenceCost measures what the ring's fence adds to a write: the
// latency (median and p99) of a passing dry-run Create of fenceWriter, stamped with
// the current token of the ring's last shard, in a namespace the fence selects, before
// and after the fence of rings of 1, 16 and 64 shards is in force; every write passes.
// Each write is followed by the same write in a namespace the fence does not select,
// the control, so that the two see the same load: the fence's cost is the difference
// between the fenced and the control writes after it is in force. Each ring's fence
// stays until the test ends: deleting the API server's last policy whose parameter is
// a Lease stops its informer of Leases, after which it reads from the API every Lease
// created since, on every write (see docs/design/controllerruntime.md), which would be
// measured instead. BATON_SHARD_FENCE_COST=1 runs it (a measurement, noisy on a
// loaded machine); run it alone, in an API server no earlier test installed a fence
// in, for the same reason.
func TestShardedAdmissionFenceCost(t *testing.T) {
	if os.Getenv("BATON_SHARD_FENCE_COST") == "" {
		t.Skip("BATON_SHARD_FENCE_COST=1 measures the cost of the ring's fence")
	}
	for _, shards := range []int{1, 16, sharding.DefaultShards} {
		t.Run(fmt.Sprint(shards, " shards"), func(st *testing.T) { measureShardFence(st, t, shards) })
	}
}

// measureShardFence measures the fence of a ring of shards in t, and removes it when
// owner ends.
func measureShardFence(t, owner *testing.T, shards int) {
	e := &shardFenceEnv{fenceEnv: fenceEnv{t: t, raw: newClient(t)}, acquired: map[int]time.Time{}}
	e.ns = newNamespace(t, e.raw)
	control := newNamespace(t, e.raw)
	cfg := shared.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: fenceWriter, Groups: []string{"system:masters"}}
	var err error
	if e.writer, err = client.New(cfg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	for i := range shards {
		e.setShardHolder(i, fmt.Sprint("h", i%3))
	}
	live := e.shardToken(shards-1, fmt.Sprint("h", (shards-1)%3))
	before, _ := measureWrites(t, e.writer, live, e.ns, control)
	policies, bindings, err := NewShardedAdmissionFence(ShardedAdmissionFence{
		Name: "baton-shard-fence-" + e.ns, Ring: fenceRing, Namespace: e.ns, Shards: shards, Users: []string{fenceWriter},
		Resources:         []schema.GroupResource{{Resource: "configmaps"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}},
	})
	if err != nil {
		t.Fatal(err)
	}
	installShardFence(owner, e.raw, policies, bindings)
	e.waitRefused(e.shardToken(shards-1, "nobody"), 20*time.Second)
	after, ctl := measureWrites(t, e.writer, live, e.ns, control)
	t.Logf("%d shards, %d policies, %d bindings: a passing write's latency, median / p99: %v / %v before the fence, "+
		"%v / %v with it, %v / %v for the control alongside; added median %v",
		shards, len(policies), len(bindings), before[0], before[1], after[0], after[1], ctl[0], ctl[1], after[0]-ctl[0])
}

// TestShardedAdmissionFenceDispatchCPU profiles the API server while fenceWriter
// sends dry-run Creates stamped with the current token of the last shard of rings of
// 1, 16 and 64 shards, back to back for 10 s each, under the ring's fence, and writes
// each CPU profile to BATON_SHARD_FENCE_PROFILE/dispatch-<shards>.pprof, logging how
// many writes it covers. The policy dispatch's CPU per write is then its cumulative
// time over that count:
//
//	go tool pprof -top -cum "$KUBEBUILDER_ASSETS/kube-apiserver" dispatch-64.pprof | grep 'validating.(\*dispatcher).Dispatch$'
//
// Run it alone, as TestShardedAdmissionFenceCost, whose reasons it shares.
func TestShardedAdmissionFenceDispatchCPU(t *testing.T) {
	dir := os.Getenv("BATON_SHARD_FENCE_PROFILE")
	if dir == "" {
		t.Skip("BATON_SHARD_FENCE_PROFILE=<directory> profiles the API server under the ring's fence")
	}
	// One after the other in t, not in subtests: each ring's fence stays until the
	// test ends (see TestShardedAdmissionFenceCost).
	for _, shards := range []int{1, 16, sharding.DefaultShards} {
		profileShardFence(t, dir, shards)
	}
}

// profileShardFence profiles the API server for TestShardedAdmissionFenceDispatchCPU
// under the fence of a ring of shards, which stays until t ends.
func profileShardFence(t *testing.T, dir string, shards int) {
	e := newShardFenceEnvOf(t, shards)
	last := e.shardToken(shards-1, shardHolder(shards-1))
	e.waitPassed(last)
	done := make(chan error, 1)
	var profile []byte
	go func() {
		var err error
		profile, err = shared.Clientset().CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", "10").DoRaw(context.Background())
		done <- err
	}()
	writes := 0
	for len(done) == 0 {
		if err := e.writeStamped(last); err != nil {
			<-done
			t.Fatalf("write %d with the current token: %v", writes, err)
		}
		writes++
	}
	if err := <-done; err != nil {
		t.Fatalf("the API server's CPU profile: %v", err)
	}
	file := filepath.Join(dir, fmt.Sprintf("dispatch-%d.pprof", shards))
	if err := os.WriteFile(file, profile, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d shards: %d writes in the profile %s", shards, writes, file)
}

// measureWrites sends 500 dry-run Creates of a ConfigMap stamped with s by writer in
// namespace ns, each followed by the same write in namespace control, and returns
// the median and p99 latency of each.
func measureWrites(t *testing.T, writer client.Client, s stamps, ns, control string) (inNS, inControl [2]time.Duration) {
	t.Helper()
	const writes = 500
	lat := [2][]time.Duration{make([]time.Duration, writes), make([]time.Duration, writes)}
	for i := range writes {
		for j, n := range []string{ns, control} {
			cm := configMap(n, "probe")
			s.stamp(cm)
			start := time.Now()
			if err := writer.Create(context.Background(), cm, client.DryRunAll); err != nil {
				t.Fatalf("write %d in %s with the current token: %v", i, n, err)
			}
			lat[j][i] = time.Since(start)
		}
	}
	for j := range lat {
		slices.Sort(lat[j])
	}
	return [2]time.Duration{lat[0][writes/2], lat[0][writes*99/100]}, [2]time.Duration{lat[1][writes/2], lat[1][writes*99/100]}
}
