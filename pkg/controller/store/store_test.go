package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// factory returns two handles on one fresh, absent object: a and b play two
// writers (they may be the same value).
type factory func(t *testing.T, name string) (a, b store.Store)

func TestMemoryContract(t *testing.T) {
	contract(t, func(t *testing.T, name string) (store.Store, store.Store) {
		m, err := store.NewMemory(name)
		if err != nil {
			t.Fatal(err)
		}
		return m, m
	})
}

// TestConfigMapContract runs the contract against a real API server: the
// fake clientset does not enforce resourceVersions.
func TestConfigMapContract(t *testing.T) {
	env := batontest.StartEnv(t)
	contract(t, func(t *testing.T, name string) (store.Store, store.Store) {
		a, err := store.NewConfigMap(env.Clientset(), "default", name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := store.NewConfigMap(env.Clientset(), "default", name)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	})
}

func contract(t *testing.T, newStore factory) {
	ctx := t.Context()
	t.Run("absent", func(t *testing.T) {
		s, _ := newStore(t, "absent")
		if _, err := s.Get(ctx); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get: %v, want ErrNotFound", err)
		}
		if _, err := s.Update(ctx, store.Object{ResourceVersion: "1"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Update: %v, want ErrNotFound", err)
		}
	})
	t.Run("create get update", func(t *testing.T) {
		s, _ := newStore(t, "roundtrip")
		in := store.Object{
			Name:        "ignored",
			Labels:      map[string]string{"app": "baton"},
			Annotations: map[string]string{"baton.dev/term": "7"},
			Data:        map[string]string{"config.yaml": "a: 1\n"},
		}
		created, err := s.Create(ctx, in)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if created.Name != "roundtrip" || created.ResourceVersion == "" {
			t.Fatalf("Create returned name %q rv %q", created.Name, created.ResourceVersion)
		}
		if _, err := s.Create(ctx, in); !errors.Is(err, store.ErrConflict) {
			t.Errorf("second Create: %v, want ErrConflict", err)
		}
		got, err := s.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Data["config.yaml"] != "a: 1\n" || got.Annotations["baton.dev/term"] != "7" || got.Labels["app"] != "baton" {
			t.Errorf("Get returned %+v", got)
		}
		if got.ResourceVersion != created.ResourceVersion {
			t.Errorf("Get rv %s, Create rv %s", got.ResourceVersion, created.ResourceVersion)
		}
		// Objects are read-only: a change is made to a copy.
		got = got.Clone()
		got.Data["config.yaml"] = "a: 2\n"
		updated, err := s.Update(ctx, got)
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		if updated.ResourceVersion == got.ResourceVersion {
			t.Error("Update kept the resourceVersion")
		}
		if _, err := s.Update(ctx, got); !errors.Is(err, store.ErrConflict) {
			t.Errorf("Update with a stale resourceVersion: %v, want ErrConflict", err)
		}
		got.ResourceVersion = ""
		if _, err := s.Update(ctx, got); !errors.Is(err, store.ErrNoResourceVersion) {
			t.Errorf("Update without resourceVersion: %v, want ErrNoResourceVersion", err)
		}
		final, _ := s.Get(ctx)
		if final.Data["config.yaml"] != "a: 2\n" {
			t.Errorf("stored data %q", final.Data["config.yaml"])
		}
	})
	t.Run("two writers from one read", func(t *testing.T) {
		a, b := newStore(t, "race")
		if _, err := a.Create(ctx, store.Object{Data: map[string]string{"n": "0"}}); err != nil {
			t.Fatal(err)
		}
		ra, _ := a.Get(ctx)
		rb, _ := b.Get(ctx)
		ra.Data = map[string]string{"n": "a"}
		rb.Data = map[string]string{"n": "b"}
		_, errA := a.Update(ctx, ra)
		_, errB := b.Update(ctx, rb)
		if errA != nil || !errors.Is(errB, store.ErrConflict) {
			t.Errorf("updates from one read: a %v, b %v; want a to win and b ErrConflict", errA, errB)
		}
	})
	t.Run("no lost updates", func(t *testing.T) {
		a, b := newStore(t, "counter")
		if _, err := a.Create(ctx, store.Object{Data: map[string]string{"n": "0"}}); err != nil {
			t.Fatal(err)
		}
		const writers, each = 4, 5
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			s := a
			if w%2 == 1 {
				s = b
			}
			wg.Go(func() {
				for range each {
					if err := increment(ctx, s); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, _ := a.Get(ctx)
		if got.Data["n"] != strconv.Itoa(writers*each) {
			t.Errorf("counter = %s after %d increments: updates were lost", got.Data["n"], writers*each)
		}
	})
}

// increment is the read-modify-write loop every writer of a Store uses:
// the object read is read-only, so the map that changes is a new one.
func increment(ctx context.Context, s store.Store) error {
	for range 1000 {
		o, err := s.Get(ctx)
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(o.Data["n"])
		o.Data = map[string]string{"n": strconv.Itoa(n + 1)}
		if _, err := s.Update(ctx, o); errors.Is(err, store.ErrConflict) {
			continue
		} else {
			return err
		}
	}
	return errors.New("increment: too many conflicts")
}

func TestConstructorsCheckArguments(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"memory name", func() error { _, err := store.NewMemory(""); return err }, "store: memory object name is empty"},
		{"clientset", func() error { _, err := store.NewConfigMap(nil, "default", "x"); return err }, "store: clientset is nil"},
		{"namespace", func() error { _, err := store.NewConfigMap(cs, "", "x"); return err }, `store: namespace ""`},
		{"name", func() error { _, err := store.NewConfigMap(cs, "default", "Bad_Name"); return err }, `store: configmap name "Bad_Name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.new()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestMemoryHelpers(t *testing.T) {
	m, _ := store.NewMemory("obj")
	if m.String() != "memory/obj" {
		t.Errorf("String = %q", m.String())
	}
	first := m.Set(store.Object{Data: map[string]string{"k": "v"}})
	m.Delete()
	if _, err := m.Get(t.Context()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	again, err := m.Create(t.Context(), store.Object{})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := strconv.Atoi(first.ResourceVersion)
	r2, _ := strconv.Atoi(again.ResourceVersion)
	if r2 <= r1 {
		t.Errorf("resourceVersion went back across Delete: %d then %d", r1, r2)
	}
	if m.Writes() != 2 {
		t.Errorf("Writes = %d, want 2", m.Writes())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context: %v", err)
	}
}

func ExampleMemory() {
	ctx := context.Background()
	s, _ := store.NewMemory("published")
	obj, _ := s.Create(ctx, store.Object{Data: map[string]string{"config.yaml": "v1"}})
	stale := obj

	// obj is read-only: the change goes into a map of its own.
	obj.Data = map[string]string{"config.yaml": "v2"}
	_, err := s.Update(ctx, obj)
	fmt.Println("update:", err)
	_, err = s.Update(ctx, stale)
	fmt.Println("stale update conflicts:", errors.Is(err, store.ErrConflict))
	// Output:
	// update: <nil>
	// stale update conflicts: true
}

func BenchmarkMemoryReadModifyWrite(b *testing.B) {
	ctx := context.Background()
	m, _ := store.NewMemory("bench")
	m.Set(store.Object{Data: map[string]string{"n": "0"}})
	b.ReportAllocs()
	for b.Loop() {
		if err := increment(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryGet is the baseline: the read alone.
func BenchmarkMemoryGet(b *testing.B) {
	ctx := context.Background()
	m, _ := store.NewMemory("bench")
	m.Set(store.Object{Data: map[string]string{"n": "0"}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Get(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConfigMapUpdateKeepsWhatObjectDoesNotCarry: binaryData and owner
// references added by someone else survive a publish through the store.
func TestConfigMapUpdateKeepsWhatObjectDoesNotCarry(t *testing.T) {
	env := batontest.StartEnv(t)
	ctx := t.Context()
	cms := env.Clientset().CoreV1().ConfigMaps("default")
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "published", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}}},
		Data:       map[string]string{"config.yaml": "a: 1\n"},
		BinaryData: map[string][]byte{"blob": {1, 2, 3}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.NewConfigMap(env.Clientset(), "default", "published")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // from a fresh read, then from the remembered write
		o, err := s.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o.Data = map[string]string{"config.yaml": fmt.Sprintf("a: %d\n", i+2)}
		if _, err := s.Update(ctx, o); err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	got, err := cms.Get(ctx, "published", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["config.yaml"] != "a: 3\n" || len(got.BinaryData["blob"]) != 3 || len(got.OwnerReferences) != 1 {
		t.Fatalf("after updates: data %v, binaryData %v, owners %v", got.Data, got.BinaryData, got.OwnerReferences)
	}
	// A stale resourceVersion is still a conflict.
	if _, err := s.Update(ctx, store.Object{ResourceVersion: owner.ResourceVersion, Data: map[string]string{}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update with a stale resourceVersion: %v, want ErrConflict", err)
	}
}

// TestMemorySharesMaps checks the write path that shares maps: a read
// copies nothing, and a write that changes only the annotations allocates
// less than the maps it keeps would cost to copy, however large the data.
func TestMemorySharesMaps(t *testing.T) {
	ctx := context.Background()
	m, err := store.NewMemory("share")
	if err != nil {
		t.Fatal(err)
	}
	data := make(map[string]string, 100)
	for i := range 100 {
		data["k"+strconv.Itoa(i)] = "v"
	}
	if _, err := m.Create(ctx, store.Object{
		Labels: map[string]string{"app": "baton"}, Annotations: map[string]string{"n": "0"}, Data: data,
	}); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() {
		if _, err := m.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a Get costs %.0f allocations, want 0: it copies", n)
	}
	ann := []map[string]string{{"n": "1"}, {"n": "2"}} // made before, not counted
	i := 0
	n := testing.AllocsPerRun(50, func() {
		o, err := m.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i++
		o.Annotations = ann[i%2]
		if _, err := m.Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	})
	// One allocation: the new resourceVersion (the read-only check of
	// race-detector builds allocates nothing).
	if n > 1 {
		t.Errorf("an annotation-only write costs %.0f allocations, want 1 (the resourceVersion): it copies maps", n)
	}
	got, _ := m.Get(ctx)
	if len(got.Data) != 100 || got.Labels["app"] != "baton" {
		t.Errorf("after annotation-only writes: %d data keys, labels %v", len(got.Data), got.Labels)
	}
}

// TestMemoryChecksReadOnly: with the check on (as in every race-detector
// build), changing a map the store returned or was given makes its next
// call panic, naming the store; changing a copy does not.
func TestMemoryChecksReadOnly(t *testing.T) {
	defer store.SetCheckShared(true)()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(given, returned, read store.Object)
		panics bool
	}{
		{"a copy", func(_, _, read store.Object) { read.Clone().Data["k"] = "x" }, false},
		{"the map given", func(given, _, _ store.Object) { given.Labels["app"] = "x" }, true},
		{"the map returned", func(_, returned, _ store.Object) { returned.Annotations["n"] = "x" }, true},
		{"the map read", func(_, _, read store.Object) { delete(read.Data, "k") }, true},
		{"an added key", func(_, _, read store.Object) { read.Data["new"] = "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := store.NewMemory("ro")
			if err != nil {
				t.Fatal(err)
			}
			given := store.Object{
				Labels: map[string]string{"app": "baton"}, Annotations: map[string]string{"n": "0"}, Data: map[string]string{"k": "v"},
			}
			returned, err := m.Create(ctx, given)
			if err != nil {
				t.Fatal(err)
			}
			read, err := m.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(given, returned, read)
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				_, _ = m.Get(ctx)
			}()
			switch {
			case tc.panics && recovered == nil:
				t.Fatal("Get after the change did not panic")
			case !tc.panics && recovered != nil:
				t.Fatalf("Get panicked: %v", recovered)
			case tc.panics && !strings.Contains(fmt.Sprint(recovered), "store: memory/ro: a map of the stored object was modified"):
				t.Fatalf("panic %q does not name the store and the fault", recovered)
			}
		})
	}
}
