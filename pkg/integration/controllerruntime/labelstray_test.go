package controllerruntime

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/pkg/batontest"
)

// TestShardedLabelCacheStrayRelabelRetried is the regression test of what the sharded
// chaos soak found (test/chaos/sharded, doc.go, # Findings): a ConfigMap labelled with
// another shard by hand, whose relabel patch from the informer of that shard is
// refused, must still be relabelled with its own shard within a resync (labelResync,
// shortened here to 2s) of the refusal. The shard informers did not resync, so it
// stayed mislabelled (cached by the wrong shard's owner, not by its own's) until it
// changed or that shard moved.
func TestShardedLabelCacheStrayRelabelRetried(t *testing.T) {
	saved := labelResync
	labelResync = 2 * time.Second
	t.Cleanup(func() { labelResync = saved })
	run := newLabelRun(t, 1, 4)
	run.create(1)
	cm := run.owners[0]
	var refusing atomic.Bool
	var refused atomic.Int32
	h := run.handles[0]
	h.watcher = interceptor.NewClient(h.watcher, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if refusing.Load() && obj.GetName() == cm.Name && obj.GetObjectKind().GroupVersionKind().Kind == "ConfigMap" {
				refused.Add(1)
				return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cm.Name, errRefusedByTest)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	run.nodes[0].start(t)
	batontest.WaitFor(t, 30*time.Second, "settled", func() bool { return run.settled(run.handles, nil) })
	own := run.ring.ShardOf(string(cm.UID))
	refusing.Store(true)
	run.setLabel(cm, strconv.Itoa((own+1)%run.ring.Shards()))
	batontest.WaitFor(t, 10*time.Second, "the stray relabel refused", func() bool { return refused.Load() > 0 })
	refusing.Store(false)
	batontest.WaitFor(t, labelResync+10*time.Second, "the stray relabelled with its own shard after the refusal", func() bool {
		var got corev1.ConfigMap
		if err := run.direct.Get(context.Background(), client.ObjectKeyFromObject(cm), &got); err != nil {
			t.Fatal(err)
		}
		return got.Labels[run.key] == strconv.Itoa(own)
	})
}

// errRefusedByTest is the cause of the patches the test refuses.
var errRefusedByTest = errorString("refused by the test")

type errorString string

func (e errorString) Error() string { return string(e) }
