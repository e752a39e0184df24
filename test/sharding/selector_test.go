package sharding

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestSelectorOnAPIServer lists ConfigMaps with the selectors of a placement's shares
// on an API server with the ShardedListAndWatch feature gate: the server accepts each
// selector, echoes it in ListMeta.ShardInfo, returns exactly the objects whose
// Ring.ShardOf is in the share, and the shares together return every object once.
// Without the gate the server ignores the selector, and ShardInfo is nil: how a
// client tells that it must filter itself.
func TestSelectorOnAPIServer(t *testing.T) {
	const objects = 120
	ring, err := sharding.NewRing(sharding.DefaultShards)
	if err != nil {
		t.Fatal(err)
	}
	p := sharding.Place(ring, []string{"a", "b", "c"})

	t.Run("gate on", func(t *testing.T) {
		cs := startGated(t)
		uids := createConfigMaps(t, cs, objects)
		seen := map[string]int{}
		for _, m := range []string{"a", "b", "c"} {
			sel, err := ring.Selector(p.Shards(m))
			if err != nil {
				t.Fatal(err)
			}
			list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{ShardSelector: sel, LabelSelector: "test=sharding"})
			if err != nil {
				t.Fatalf("list with the selector of %s's share: %v\nselector: %s", m, err, sel)
			}
			if list.ShardInfo == nil || list.ShardInfo.Selector != sel {
				t.Fatalf("%s's share: ShardInfo %+v, want the selector echoed", m, list.ShardInfo)
			}
			for _, cm := range list.Items {
				if owner := p.Owner(ring.ShardOf(string(cm.UID))); owner != m {
					t.Errorf("%s's share has %s (uid %s), whose shard is %s's", m, cm.Name, cm.UID, owner)
				}
				seen[string(cm.UID)]++
			}
			t.Logf("%s: %d shards, %d of %d objects", m, len(p.Shards(m)), len(list.Items), objects)
		}
		for _, uid := range uids {
			if seen[uid] != 1 {
				t.Errorf("object %s listed %d times over the shares, want once", uid, seen[uid])
			}
		}
	})

	t.Run("gate off", func(t *testing.T) {
		cs := batontest.StartEnv(t).Clientset()
		createConfigMaps(t, cs, 10)
		sel, _ := ring.Selector(p.Shards("a"))
		list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{ShardSelector: sel, LabelSelector: "test=sharding"})
		if err != nil {
			t.Fatal(err)
		}
		if list.ShardInfo != nil || len(list.Items) != 10 {
			t.Fatalf("without the gate: ShardInfo %+v and %d of 10 objects, want nil and all", list.ShardInfo, len(list.Items))
		}
	})
}

// startGated starts etcd and a kube-apiserver with ShardedListAndWatch on, from the
// binaries batontest finds, and stops them when t ends.
func startGated(t *testing.T) kubernetes.Interface {
	t.Helper()
	dir, err := batontest.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(dir, "kube-apiserver")
	api.Configure().Append("feature-gates", "ShardedListAndWatch=true")
	api.Configure().Set("request-timeout", "3s")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start API server with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop API server: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func createConfigMaps(t *testing.T, cs kubernetes.Interface, n int) []string {
	t.Helper()
	var uids []string
	for i := range n {
		cm, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("object-", i), Labels: map[string]string{"test": "sharding"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(cm.UID))
	}
	return uids
}
