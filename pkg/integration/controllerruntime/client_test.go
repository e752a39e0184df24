package controllerruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testseed"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/termctx"
)

// fakeTerm returns a context of term whose end is end: what a Runtime hands a
// leader-only run, without the elector. It ends as the runtime's term context does
// when leadership is lost, with lifecycle.ErrLeadershipLost for its cause.
func fakeTerm(term uint64) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	return termctx.NewContext(ctx, term), func() { cancel(lifecycle.ErrLeadershipLost) }
}

// onLease returns a fenced client's leases that give lease for every term.
func onLease(lease *leaseReader) func(termctx.Term) *leaseReader {
	return func(termctx.Term) *leaseReader { return lease }
}

func newClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fence-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v"}}
}

func TestFencedClientRefusals(t *testing.T) {
	raw := newClient(t)
	f := NewFencedClient(raw)
	ns := newNamespace(t, raw)
	old, endOld := fakeTerm(5)
	defer endOld()
	cur, endCur := fakeTerm(7)
	defer endCur()

	// No term: refused before anything is sent.
	if err := f.Create(context.Background(), configMap(ns, "a")); !errors.Is(err, ErrNoTerm) {
		t.Fatalf("create without a term: %v, want ErrNoTerm", err)
	}
	// Create stamps the term.
	a := configMap(ns, "a")
	if err := f.Create(old, a); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := raw.Get(context.Background(), client.ObjectKeyFromObject(a), &got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[TermAnnotation] != "5" {
		t.Fatalf("stamp %q, want 5", got.Annotations[TermAnnotation])
	}
	staleRead := got.DeepCopy()
	// Update without a resourceVersion is refused.
	noRV := configMap(ns, "a")
	if err := f.Update(cur, noRV); !errors.Is(err, ErrNoResourceVersion) {
		t.Fatalf("update without resourceVersion: %v, want ErrNoResourceVersion", err)
	}
	// The newer term writes.
	newer := got.DeepCopy()
	newer.Data["k"] = "term 7"
	if err := f.Update(cur, newer); err != nil {
		t.Fatal(err)
	}
	// Server-side: the old term's write on the version it read conflicts.
	staleRead.Data["k"] = "term 5"
	if err := f.Update(old, staleRead.DeepCopy()); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
	if err := f.Delete(old, staleRead.DeepCopy()); !apierrors.IsConflict(err) {
		t.Fatalf("stale delete: %v, want a conflict", err)
	}
	// Client-side: the old term reading the newer write refuses itself.
	if err := raw.Get(context.Background(), client.ObjectKeyFromObject(a), &got); err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func() error{
		"update": func() error { return f.Update(old, got.DeepCopy()) },
		"patch":  func() error { return f.Patch(old, got.DeepCopy(), client.MergeFrom(got.DeepCopy())) },
		"delete": func() error { return f.Delete(old, got.DeepCopy()) },
		"status": func() error { return f.Status().Update(old, got.DeepCopy()) },
	} {
		if err := write(); !errors.Is(err, ErrStaleTerm) {
			t.Errorf("%s by the older term of an object stamped newer: %v, want ErrStaleTerm", name, err)
		}
	}
	// Once the term ended, every write is refused.
	endCur()
	for name, write := range map[string]func() error{
		"create":      func() error { return f.Create(cur, configMap(ns, "b")) },
		"update":      func() error { return f.Update(cur, got.DeepCopy()) },
		"delete":      func() error { return f.Delete(cur, got.DeepCopy()) },
		"deleteallof": func() error { return f.DeleteAllOf(cur, &corev1.ConfigMap{}, client.InNamespace(ns)) },
	} {
		if err := write(); !errors.Is(err, ErrTermEnded) || !errors.Is(err, lifecycle.ErrLeadershipLost) {
			t.Errorf("%s in an ended term: %v, want ErrTermEnded wrapping the cause", name, err)
		}
	}
	if err := raw.Get(context.Background(), client.ObjectKeyFromObject(a), &got); err != nil || got.Data["k"] != "term 7" {
		t.Fatalf("object after the refused writes: %v %v, want the term 7 write", got.Data, err)
	}
}

// TestFencedClientRandomSchedules runs writers of random terms, which start and end at
// random, against one object through the fenced client, each writing from what it last
// read. The checker: the stamps the API server accepted never go back, and no write was
// accepted after its writer's term ended. BATON_SEED=<n> replays one schedule.
func TestFencedClientRandomSchedules(t *testing.T) {
	seeds := testseed.Seeds(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}...)
	raw := newClient(t)
	monitor := batontest.WatchStamps(t, shared.Clientset(), TermAnnotation)
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			if err := fenceSchedule(t, raw, seed); err != nil {
				t.Fatalf("seed %d (replay with BATON_SEED=%d): %v", seed, seed, err)
			}
		})
	}
	if err := monitor.Err(); err != nil {
		t.Fatal(err)
	}
}

// writer is one term's view in a schedule.
type writer struct {
	ctx   context.Context
	end   context.CancelFunc
	term  uint64
	ended bool
	last  *corev1.ConfigMap // what it last read
}

func fenceSchedule(t *testing.T, raw client.Client, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	f := NewFencedClient(raw)
	ns := newNamespace(t, raw)
	key := client.ObjectKey{Namespace: ns, Name: "obj"}
	if err := raw.Create(context.Background(), configMap(ns, "obj")); err != nil {
		return err
	}
	var ws []*writer
	next := uint64(1)
	accepted := uint64(0) // the term of the last write the API server accepted
	defer func() {
		for _, w := range ws {
			w.end()
		}
	}()
	for step := range 60 {
		switch op := rng.IntN(10); {
		case op < 2 || len(ws) == 0: // a new term starts
			next += uint64(1 + rng.IntN(3))
			ctx, end := fakeTerm(next)
			ws = append(ws, &writer{ctx: ctx, end: end, term: next})
		case op < 3: // a term ends
			w := ws[rng.IntN(len(ws))]
			w.end()
			w.ended = true
		case op < 6: // a read
			w := ws[rng.IntN(len(ws))]
			var cm corev1.ConfigMap
			if err := raw.Get(context.Background(), key, &cm); err != nil {
				return err
			}
			w.last = &cm
		default: // a write from the last read
			w := ws[rng.IntN(len(ws))]
			if w.last == nil {
				continue
			}
			obj := w.last.DeepCopy()
			obj.Data = map[string]string{"step": fmt.Sprint(step)}
			err := f.Update(w.ctx, obj)
			switch {
			case err == nil && w.ended:
				return fmt.Errorf("step %d: term %d wrote after it ended", step, w.term)
			case err == nil && w.term < accepted:
				return fmt.Errorf("step %d: term %d overwrote term %d's write", step, w.term, accepted)
			case err == nil:
				accepted = w.term
				if stamped := obj.Annotations[TermAnnotation]; stamped != fmt.Sprint(w.term) {
					return fmt.Errorf("step %d: stamp %q, want %d", step, stamped, w.term)
				}
				w.last = obj
			case errors.Is(err, ErrTermEnded) && w.ended,
				errors.Is(err, ErrStaleTerm), apierrors.IsConflict(err):
			default:
				return fmt.Errorf("step %d: term %d (ended %v): %w", step, w.term, w.ended, err)
			}
		}
	}
	return nil
}

// TestFencedClientClosesGaps: the writes that got past the client's fence before: a
// Delete by name, patches without a resourceVersion, raw, JSON and apply patches that
// carried no stamp, DeleteAllOf, and refusals that were not counted.
func TestFencedClientClosesGaps(t *testing.T) {
	raw := newClient(t)
	ns := newNamespace(t, raw)
	ctx := context.Background()
	refused := &atomic.Uint64{}
	g := &gate{Client: raw}
	f := &fencedClient{Client: g, reader: raw, refused: refused, logger: slog.Default()}
	old, endOld := fakeTerm(5)
	defer endOld()
	cur, endCur := fakeTerm(7)
	defer endCur()
	get := func(name string) (*corev1.ConfigMap, error) {
		var cm corev1.ConfigMap
		err := raw.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm)
		return &cm, err
	}
	byName := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}

	// Delete by name of an object a newer term wrote: refused.
	if err := f.Create(cur, configMap(ns, "newer")); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(old, byName("newer")); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("delete by name of an object stamped newer: %v, want ErrStaleTerm", err)
	}
	if _, err := get("newer"); err != nil {
		t.Fatalf("the object after the refused delete: %v", err)
	}

	// A Delete by name in flight while the newer term writes: the preconditions of
	// the version checked refuse it.
	if err := f.Create(old, configMap(ns, "inflight")); err != nil {
		t.Fatal(err)
	}
	arrived, release := g.holdNext("Delete")
	errc := make(chan error, 1)
	go func() { errc <- f.Delete(old, byName("inflight")) }()
	<-arrived
	cm, err := get("inflight")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "term 7"
	if err := f.Update(cur, cm); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-errc; !apierrors.IsConflict(err) {
		t.Fatalf("a stale delete by name in flight: %v, want a conflict", err)
	}

	// A merge patch without the optimistic lock no longer moves the stamp back: it is
	// a compare-and-swap on the version the object was read at.
	if err := f.Create(old, configMap(ns, "patched")); err != nil {
		t.Fatal(err)
	}
	read, err := get("patched")
	if err != nil {
		t.Fatal(err)
	}
	newer := read.DeepCopy()
	newer.Data["k"] = "term 7"
	if err := f.Update(cur, newer); err != nil {
		t.Fatal(err)
	}
	stale := read.DeepCopy()
	stale.Data["k"] = "term 5"
	if err := f.Patch(old, stale, client.MergeFrom(read)); !apierrors.IsConflict(err) {
		t.Fatalf("a stale merge patch from an old read: %v, want a conflict", err)
	}
	// So is a JSON patch: it carries the version of obj as a precondition too.
	if err := f.Patch(old, read.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/data/k","value":"term 5"}]`))); !apierrors.IsConflict(err) {
		t.Fatalf("a stale JSON patch from an old read: %v, want a conflict", err)
	}
	if cm, err := get("patched"); err != nil || cm.Annotations[TermAnnotation] != "7" || cm.Data["k"] != "term 7" {
		t.Fatalf("after the stale patches: %v %v %v, want term 7's write", cm.Annotations, cm.Data, err)
	}

	// Every patch type carries the writer's stamp, also on an object without
	// annotations.
	for name, write := range map[string]func(name string) error{
		"raw merge": func(name string) error {
			return f.Patch(cur, byName(name), client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"x"}}`)))
		},
		"JSON": func(name string) error {
			return f.Patch(cur, byName(name), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/data/k","value":"x"}]`)))
		},
		"strategic merge": func(name string) error {
			return f.Patch(cur, byName(name), client.RawPatch(types.StrategicMergePatchType, []byte(`{"data":{"k":"x"}}`)))
		},
		"apply": func(name string) error {
			return f.Apply(cur, corev1ac.ConfigMap(name, ns).WithData(map[string]string{"k": "x"}), client.FieldOwner("t"), client.ForceOwnership)
		},
	} {
		obj := "stamp-" + strings.ReplaceAll(strings.ToLower(name), " ", "-")
		if err := raw.Create(ctx, configMap(ns, obj)); err != nil {
			t.Fatal(err)
		}
		if err := write(obj); err != nil {
			t.Fatalf("%s patch: %v", name, err)
		}
		if cm, err := get(obj); err != nil || cm.Annotations[TermAnnotation] != "7" || cm.Data["k"] != "x" {
			t.Errorf("after a %s patch: %v %v %v, want stamp 7 and the patch's data", name, cm.Annotations, cm.Data, err)
		}
	}

	// DeleteAllOf checks each object: the one a newer term wrote stays.
	for _, name := range []string{"all-old", "all-newer"} {
		obj := configMap(ns, name)
		obj.Labels = map[string]string{"set": "all"}
		term := old
		if name == "all-newer" {
			term = cur
		}
		if err := f.Create(term, obj); err != nil {
			t.Fatal(err)
		}
	}
	err = f.DeleteAllOf(old, &corev1.ConfigMap{}, client.InNamespace(ns), client.MatchingLabels{"set": "all"})
	if !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("DeleteAllOf over an object stamped newer: %v, want ErrStaleTerm", err)
	}
	if _, err := get("all-old"); !apierrors.IsNotFound(err) {
		t.Fatalf("the old term's object after DeleteAllOf: %v, want deleted", err)
	}
	if _, err := get("all-newer"); err != nil {
		t.Fatalf("the newer term's object after DeleteAllOf: %v, want kept", err)
	}

	// Every refusal is counted: the ones above, and these three.
	before := refused.Load()
	if err := f.Update(cur, configMap(ns, "patched")); !errors.Is(err, ErrNoResourceVersion) {
		t.Fatalf("update without a resourceVersion: %v", err)
	}
	if err := f.Create(ctx, configMap(ns, "no-term")); !errors.Is(err, ErrNoTerm) {
		t.Fatalf("create outside a term: %v", err)
	}
	endOld()
	if err := f.Delete(old, byName("patched")); !errors.Is(err, ErrTermEnded) {
		t.Fatalf("delete in an ended term: %v", err)
	}
	if got := refused.Load() - before; got != 3 {
		t.Fatalf("%d refusals counted, want 3", got)
	}
	if refused.Load() != 2+3 {
		t.Fatalf("%d refusals counted in all, want 5 (the delete by name's and DeleteAllOf's, and these 3)", refused.Load())
	}
}

// TestFencedClientOverwritesAStampOfNoTerm: an object stamped with a term above every
// term of the Lease (2^64-1, or the writer's term + 1) is written over by a replica
// that still holds the Lease in its term, with a WARN naming the object; a replica that
// does not hold it is refused as before.
func TestFencedClientOverwritesAStampOfNoTerm(t *testing.T) {
	raw := newClient(t)
	ns := newNamespace(t, raw)
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "noterm"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), AcquireTime: &now, RenewTime: &now}}
	if err := raw.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logsMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logsMu}, nil))
	fencedAs := func(identity string) *fencedClient {
		return &fencedClient{Client: raw, reader: raw, refused: &atomic.Uint64{}, logger: logger,
			leases: onLease(&leaseReader{cs: shared.Clientset(), namespace: ns, name: "noterm", identity: identity})}
	}
	f, fOther := fencedAs("me"), fencedAs("other")
	term, end := fakeTerm(7)
	t.Cleanup(end)
	for i, stamp := range []string{"18446744073709551615", "8"} {
		name := fmt.Sprint("restored-", i)
		obj := configMap(ns, name)
		obj.Annotations = map[string]string{TermAnnotation: stamp}
		if err := raw.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := raw.Get(ctx, client.ObjectKeyFromObject(obj), &cm); err != nil {
			t.Fatal(err)
		}
		if err := fOther.Update(term, cm.DeepCopy()); !errors.Is(err, ErrStaleTerm) {
			t.Fatalf("stamp %s, a replica not holding the Lease: %v, want ErrStaleTerm", stamp, err)
		}
		if err := f.Update(term, cm.DeepCopy()); err != nil {
			t.Fatalf("stamp %s, the holder in its term: %v, want the stamp overwritten", stamp, err)
		}
		if err := raw.Get(ctx, client.ObjectKeyFromObject(obj), &cm); err != nil || cm.Annotations[TermAnnotation] != "7" {
			t.Fatalf("stamp %s after the holder's write: %v %v, want 7", stamp, cm.Annotations, err)
		}
		logsMu.Lock()
		logged := logs.String()
		logsMu.Unlock()
		if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, ns+"/"+name) || !strings.Contains(logged, "stamp="+stamp) {
			t.Fatalf("stamp %s: logged %q, want a WARN naming the object and the stamp", stamp, logged)
		}
	}
	// A Delete by name of such an object goes through too.
	obj := configMap(ns, "restored-delete")
	obj.Annotations = map[string]string{TermAnnotation: "18446744073709551615"}
	if err := raw.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(term, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restored-delete"}}); err != nil {
		t.Fatalf("delete by name by the holder: %v", err)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
