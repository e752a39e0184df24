package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/baton-dev/baton/internal/testseed"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/internal/replicatest"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
)

// fakeTerm returns a context of term whose end is end: what a Runtime hands a
// leader-only run, without the elector. It ends as the runtime's term context does
// when leadership is lost, with lifecycle.ErrLeadershipLost for its cause.
func fakeTerm(term uint64) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	return context.WithValue(ctx, termRefKey{}, &termRef{term: term, ctx: ctx}), func() { cancel(lifecycle.ErrLeadershipLost) }
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
	monitor := replicatest.Watch(t, shared.Clientset(), TermAnnotation)
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
	ctx    context.Context
	end    context.CancelFunc
	term   uint64
	ended  bool
	last   *corev1.ConfigMap // what it last read
	reread bool
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
