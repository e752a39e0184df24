package batontest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestStartServesLeasesAndSurvivesRestart(t *testing.T) {
	env := StartEnv(t)
	ctx := t.Context()
	leases := env.Clientset().CoordinationV1().Leases("default")
	holder := "a"
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create lease: %v", err)
	}

	// A subprocess-style client from the kubeconfig file reaches the same server.
	fromFile, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig(t))
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	fileClient, err := kubernetes.NewForConfig(fromFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fileClient.CoordinationV1().Leases("default").Get(ctx, "testenv", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease through kubeconfig file: %v", err)
	}
	if got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("resourceVersion through kubeconfig = %s, want %s", got.ResourceVersion, created.ResourceVersion)
	}

	// An open watch must not hold the stop up.
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch leases: %v", err)
	}
	defer w.Stop()
	stopStart := time.Now()
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(stopStart); d > 10*time.Second {
		t.Errorf("StopAPIServer with an open watch took %v, want < 10s", d)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = leases.Get(short, "testenv", metav1.GetOptions{})
	cancel()
	if err == nil {
		t.Fatal("get lease succeeded while the API server was stopped")
	}
	if err := env.StopAPIServer(); err != nil {
		t.Fatalf("second stop: %v", err)
	}

	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// The old config, clientset and file still work, and etcd kept the data.
	for name, c := range map[string]kubernetes.Interface{"env clientset": env.Clientset(), "kubeconfig file": fileClient} {
		got, err := c.CoordinationV1().Leases("default").Get(ctx, "testenv", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: get lease after restart: %v", name, err)
		}
		if got.ResourceVersion != created.ResourceVersion || got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != holder {
			t.Fatalf("%s: lease after restart = rv %s holder %v, want rv %s holder %s",
				name, got.ResourceVersion, got.Spec.HolderIdentity, created.ResourceVersion, holder)
		}
	}

	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if err := env.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := env.StartAPIServer(); !errors.Is(err, ErrClosed) {
		t.Fatalf("StartAPIServer after Close = %v, want ErrClosed", err)
	}
}

func TestAssetsDirMissingBinaries(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", empty)
	_, err := AssetsDir()
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("AssetsDir with empty KUBEBUILDER_ASSETS = %v, want ErrNoBinaries", err)
	}
	if !strings.Contains(err.Error(), "hack/test.sh") {
		t.Fatalf("error %q does not tell to run hack/test.sh", err)
	}
	if _, err := NewEnv(); !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("New with empty KUBEBUILDER_ASSETS = %v, want ErrNoBinaries", err)
	}

	// A non-executable file does not count.
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(empty, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := AssetsDir(); !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("AssetsDir with non-executable files = %v, want ErrNoBinaries", err)
	}
}

func TestAssetsDirFallsBackToCacheDir(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("BATON_TESTENV_DIR", dir)
	got, err := AssetsDir()
	if err != nil || got != dir {
		t.Fatalf("AssetsDir = %q, %v; want %q", got, err, dir)
	}

	t.Setenv("BATON_TESTENV_DIR", "")
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	want := filepath.Join(xdg, "baton", "k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion)
	got, err = AssetsDir()
	if got != want || !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("AssetsDir under empty XDG_CACHE_HOME = %q, %v; want %q and ErrNoBinaries", got, err, want)
	}
}

// TestVersionsMatchTestenvScript keeps the cache directory named here in step
// with the one hack/testenv.sh builds into.
func TestVersionsMatchTestenvScript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "testenv.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"kube_version": KubernetesVersion, "etcd_version": EtcdVersion} {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(script)
		if m == nil {
			t.Fatalf("hack/testenv.sh sets no %s", name)
		}
		if string(m[1]) != want {
			t.Errorf("hack/testenv.sh %s=%s, batontest says %s", name, m[1], want)
		}
	}
	if !strings.Contains(string(script), `baton/k8s-${kube_version}-etcd-${etcd_version}`) {
		t.Error("hack/testenv.sh cache directory layout changed; update cacheDir")
	}
}
