package shardbench

import (
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/baton-dev/baton/pkg/batontest"
)

// startGatedEnv starts etcd and a kube-apiserver with the ShardedListAndWatch feature
// gate, and stops them when tb ends. (batontest.NewEnv has no option for feature
// gates.)
func startGatedEnv(tb testing.TB) *rest.Config {
	tb.Helper()
	dir, err := batontest.AssetsDir()
	if err != nil {
		tb.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir, ControlPlaneStartTimeout: 90 * time.Second}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(dir, "kube-apiserver")
	api.Configure().Append("feature-gates", "ShardedListAndWatch=true")
	// Why: the graceful stop waits for open watches up to the request timeout (1m).
	api.Configure().Set("request-timeout", "3s")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		tb.Fatalf("start API server with ShardedListAndWatch: %v", err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("stop API server: %v", err)
		}
	})
	return cfg
}
