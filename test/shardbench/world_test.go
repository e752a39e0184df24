package shardbench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// world is the benchmark's objects on one API server: ConfigMaps in a namespace of
// their own, and the latest version of each that the benchmark wrote.
type world struct {
	cfg    *rest.Config
	direct client.Client
	ns     string
	names  []string
	uids   map[string]types.UID // fixed once created

	// mu guards latest and writes.
	mu     sync.Mutex
	latest map[string]uint64 // the resourceVersion of each object's last write
	writes int
}

// writers is how many goroutines create or update the objects at once.
const writers = 8

// newWorld creates objects ConfigMaps in a new namespace of the API server cfg reaches.
func newWorld(tb testing.TB, cfg *rest.Config, objects int) *world {
	tb.Helper()
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shardbench-"}}
	if err := direct.Create(context.Background(), ns); err != nil {
		tb.Fatal(err)
	}
	w := &world{cfg: cfg, direct: direct, ns: ns.Name, uids: map[string]types.UID{}, latest: map[string]uint64{}}
	for i := range objects {
		w.names = append(w.names, fmt.Sprintf("cm-%05d", i))
	}
	w.parallel(tb, func(ctx context.Context, name string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Data: map[string]string{"v": "0"}}
		if err := direct.Create(ctx, cm); err != nil {
			return err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.uids[name] = cm.UID
		return w.noteLocked(name, cm.ResourceVersion)
	})
	return w
}

// parallel runs fn for every object, writers at a time, and fails tb on the first error.
func (w *world) parallel(tb testing.TB, fn func(ctx context.Context, name string) error) {
	tb.Helper()
	ctx := context.Background()
	names := make(chan string)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for name := range names {
				if err := fn(ctx, name); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					for range names { // drain
					}
					return
				}
			}
		})
	}
	for _, name := range w.names {
		names <- name
	}
	close(names)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
}

func (w *world) noteLocked(name, resourceVersion string) error {
	v, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("resourceVersion %q: %w", resourceVersion, err)
	}
	if v > w.latest[name] {
		w.latest[name] = v
	}
	w.writes++
	return nil
}

// touch updates one object (a merge patch of one data key), so that it has a new
// version to reconcile, and records that version.
func (w *world) touch(ctx context.Context, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	patch := fmt.Appendf(nil, `{"data":{"v":%q}}`, strconv.FormatInt(time.Now().UnixNano(), 10))
	if err := w.direct.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.noteLocked(name, cm.ResourceVersion)
}

// touchAll updates every object once and returns the rate of the writes.
func (w *world) touchAll(tb testing.TB) float64 {
	tb.Helper()
	start := time.Now()
	w.parallel(tb, w.touch)
	return float64(len(w.names)) / time.Since(start).Seconds()
}

// churn updates random objects, rate per second, until ctx ends, and returns how many
// it updated. A failed write ends it with the error.
func (w *world) churn(ctx context.Context, rate float64, seed uint64) (int, error) {
	if rate <= 0 {
		<-ctx.Done()
		return 0, nil
	}
	rnd := rand.New(rand.NewPCG(seed, seed))
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n, nil
		case <-tick.C:
		}
		if err := w.touch(ctx, w.names[rnd.IntN(len(w.names))]); err != nil {
			if ctx.Err() != nil {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

// versions returns a copy of the latest version of every object.
func (w *world) versions() map[string]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.latest)
}
