package components_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// The rendered project's names.
const (
	managerNamespace = "project-system"
	serviceAccount   = "project-controller-manager"
	workNamespace    = "work" // where the controller's ConfigMaps are
)

// TestStatedRBACRunsAShardedController applies the rendered project's RBAC to a real
// API server and runs a sharded controller as the manager's ServiceAccount
// (impersonated), in the two shapes docs/GETTING-STARTED.md states: a ClusterRole with
// the manager's cache at cluster scope (what controller-gen writes), and a namespaced
// Role with the cache limited to that namespace. The shape in between, a namespaced
// Role with the cache at cluster scope, is refused: the cache's list is cluster-wide.
func TestStatedRBACRunsAShardedController(t *testing.T) {
	env := batontest.StartEnv(t)
	admin, err := client.New(env.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, obj := range render(t, project) {
		create(t, admin, obj)
	}
	create(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workNamespace}})
	sa := rest.CopyConfig(env.Config())
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + managerNamespace + ":" + serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + managerNamespace, "system:authenticated"},
	}

	t.Run("death signal", func(t *testing.T) {
		// What pkg/k8s/incarnation does as a follower: list, then watch, the
		// leader's pod by name in the Lease's namespace.
		cs, err := kubernetes.NewForConfig(sa)
		if err != nil {
			t.Fatal(err)
		}
		byName := metav1.ListOptions{FieldSelector: "metadata.name=leader-pod"}
		list, err := cs.CoreV1().Pods(managerNamespace).List(ctx, byName)
		if err != nil {
			t.Fatalf("list the leader's pod: %v", err)
		}
		byName.ResourceVersion = list.ResourceVersion
		w, err := cs.CoreV1().Pods(managerNamespace).Watch(ctx, byName)
		if err != nil {
			t.Fatalf("watch the leader's pod: %v", err)
		}
		w.Stop()
	})

	t.Run("ClusterRole", func(t *testing.T) {
		runAndReconcile(t, env, sa, "cluster", nil)
	})

	// Take the ClusterRole's binding away and grant the same verbs in one namespace.
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "project-manager-rolebinding"}}
	if err := admin.Delete(ctx, crb); err != nil {
		t.Fatal(err)
	}
	create(t, admin, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "manager-role", Namespace: workNamespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "update"}}},
	})
	create(t, admin, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "manager-rolebinding", Namespace: workNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "manager-role"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: serviceAccount, Namespace: managerNamespace}},
	})

	t.Run("Role, cache at cluster scope", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(sa)
		if err != nil {
			t.Fatal(err)
		}
		batontest.WaitFor(t, 30*time.Second, "the ClusterRoleBinding's removal in force", func() bool {
			_, err := cs.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
			return apierrors.IsForbidden(err)
		})
		if _, err := cs.CoreV1().ConfigMaps(workNamespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Fatalf("list in %s with the Role: %v", workNamespace, err)
		}
	})

	t.Run("Role, cache limited to its namespace", func(t *testing.T) {
		runAndReconcile(t, env, sa, "namespaced", map[string]cache.Config{workNamespace: {}})
	})
}

// runAndReconcile runs one replica of a sharded controller over ConfigMaps with cfg,
// its cache limited to namespaces (nil: cluster scope), and waits until it leads
// every shard and reconciled a ConfigMap created for it.
func runAndReconcile(t *testing.T, env *batontest.Env, cfg *rest.Config, ring string, namespaces map[string]cache.Config) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: namespaces},
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := batoncr.New(mgr, batoncr.Options{Identity: ring + "-0", MetricsRegisterer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.AddShardedController(batoncr.ShardedController{
		Name:       "stamper-" + ring,
		For:        &corev1.ConfigMap{},
		Reconciler: &stamper{reader: mgr.GetCache(), writer: rt.FencedClient(nil), by: ring},
		Sharding: sharding.Config{Name: ring, Namespace: managerNamespace, Shards: 4,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := batontest.NewReplicas(t, 1, cfg)[0]
	r.Run(t, mgr.Start)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "work-" + ring, Namespace: workNamespace}}
	cs := env.Clientset()
	if _, err := cs.CoreV1().ConfigMaps(workNamespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	batontest.WaitFor(t, 60*time.Second, "the replica to lead every shard and reconcile the ConfigMap", func() bool {
		got, err := cs.CoreV1().ConfigMaps(workNamespace).Get(t.Context(), cm.Name, metav1.GetOptions{})
		return err == nil && got.Data["reconciled-by"] == ring && len(h.Sharder().Owned()) == 4
	})
	r.Stop(t)
	// The ring's member Lease is deleted on leaving: the Role's delete.
	batontest.WaitFor(t, 30*time.Second, "the member Lease deleted", func() bool {
		_, err := cs.CoordinationV1().Leases(managerNamespace).Get(t.Context(), sharding.MemberLeaseName(ring, ring+"-0"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// stamper writes by into every ConfigMap it reconciles.
type stamper struct {
	reader client.Reader
	writer client.Client
	by     string
}

func (s *stamper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := s.reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Namespace != workNamespace || cm.Data["reconciled-by"] == s.by {
		return reconcile.Result{}, nil
	}
	cm = *cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["reconciled-by"] = s.by
	return reconcile.Result{}, s.writer.Update(ctx, &cm)
}

// create creates obj as the admin.
func create(t *testing.T, c client.Client, obj runtime.Object) {
	t.Helper()
	o, ok := obj.(client.Object)
	if !ok {
		t.Fatalf("%T is not a client.Object", obj)
	}
	if err := c.Create(t.Context(), o); err != nil {
		t.Fatalf("create %T %s: %v", obj, o.GetName(), err)
	}
}
