package deploy_test

import (
	"cmp"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/deploy"
	"github.com/baton-dev/baton/pkg/controller/config"
)

const namespace = "baton"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// objects decodes the manifests and indexes them by kind.
func objects(t *testing.T) map[string][]any {
	t.Helper()
	objs, err := deploy.Objects()
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]any{}
	for _, o := range objs {
		var kind string
		switch v := o.Object.(type) {
		case *corev1.Namespace:
			kind = "Namespace"
		case *corev1.ServiceAccount:
			kind = "ServiceAccount"
			checkNamespace(t, o.File, v.Namespace)
		case *corev1.ConfigMap:
			kind = "ConfigMap"
			checkNamespace(t, o.File, v.Namespace)
		case *rbacv1.Role:
			kind = "Role"
			checkNamespace(t, o.File, v.Namespace)
		case *rbacv1.RoleBinding:
			kind = "RoleBinding"
			checkNamespace(t, o.File, v.Namespace)
		case *appsv1.Deployment:
			kind = "Deployment"
			checkNamespace(t, o.File, v.Namespace)
		case *networkingv1.NetworkPolicy:
			kind = "NetworkPolicy"
			checkNamespace(t, o.File, v.Namespace)
		case *admissionv1.ValidatingAdmissionPolicy: // cluster-scoped
			kind = "ValidatingAdmissionPolicy"
		case *admissionv1.ValidatingAdmissionPolicyBinding: // cluster-scoped
			kind = "ValidatingAdmissionPolicyBinding"
		default:
			t.Errorf("%s: unexpected %T", o.File, o.Object)
			continue
		}
		byKind[kind] = append(byKind[kind], o.Object)
	}
	return byKind
}

func checkNamespace(t *testing.T, file, ns string) {
	t.Helper()
	if ns != namespace {
		t.Errorf("%s: namespace %q, want %q", file, ns, namespace)
	}
}

func one[T any](t *testing.T, objs map[string][]any, kind string) T {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("%d %s objects, want 1", len(objs[kind]), kind)
	}
	return objs[kind][0].(T)
}

func TestManifestsDecode(t *testing.T) {
	objs := objects(t)
	for _, kind := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "NetworkPolicy"} {
		if len(objs[kind]) != 1 {
			t.Errorf("%d %s objects, want 1", len(objs[kind]), kind)
		}
	}
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	raw, err := deploy.File("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.Resources, deploy.Manifests) {
		t.Errorf("kustomization resources %v, want %v", k.Resources, deploy.Manifests)
	}
	// Every YAML file of the directory is a manifest or the kustomization.
	err = fs.WalkDir(os.DirFS("."), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == "components" {
			return fs.SkipDir // kustomize Components of their own, tested there
		}
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		if path != "kustomization.yaml" && !slices.Contains(deploy.Manifests, path) {
			t.Errorf("%s is not listed in kustomization.yaml", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestDeployment(t *testing.T) {
	objs := objects(t)
	d := one[*appsv1.Deployment](t, objs, "Deployment")
	sa := one[*corev1.ServiceAccount](t, objs, "ServiceAccount")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, sa.Name)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Errorf("args %v, want baton run", c.Args)
	}
	env, literal := map[string]string{}, map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		} else {
			literal[e.Name] = e.Value
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" || env["POD_UID"] != "metadata.uid" {
		t.Errorf("downward API env %v, want POD_NAME=metadata.name, POD_NAMESPACE=metadata.namespace, POD_UID=metadata.uid", env)
	}
	// The death signal names the container; a wrong name proves nothing and
	// leaves every crash to the lease.
	if literal["CONTAINER_NAME"] != c.Name {
		t.Errorf("CONTAINER_NAME %q, want the container's name %q", literal["CONTAINER_NAME"], c.Name)
	}
	// The kubelet reports the nonce from the termination message file, which
	// must be the one baton run writes.
	path := cmp.Or(c.TerminationMessagePath, corev1.TerminationMessagePathDefault)
	if p, ok := flagValue(c.Args, "termination-message-path"); cmp.Or(p, corev1.TerminationMessagePathDefault) != path {
		t.Errorf("terminationMessagePath %q, --termination-message-path %q (%v): want them equal", path, p, ok)
	}
	// /metrics has no authentication: loopback only, and no port for it.
	metricsAddr, _ := flagValue(c.Args, "metrics-addr")
	if host, _, err := net.SplitHostPort(metricsAddr); err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("--metrics-addr=%s: want a loopback address", metricsAddr)
	}
	// The kubelet probes the pod's address: the probes have their own port.
	probeAddr, _ := flagValue(c.Args, "probe-addr")
	if len(c.Ports) != 1 || ":"+strconv.Itoa(int(c.Ports[0].ContainerPort)) != probeAddr || c.Ports[0].Name != "probes" {
		t.Errorf("ports %+v for --probe-addr=%s", c.Ports, probeAddr)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "probes" {
			t.Errorf("probe for %s: %+v", path, probe)
		}
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v", sc)
	}
	if sel := d.Spec.Selector.MatchLabels; d.Spec.Template.Labels["app.kubernetes.io/name"] != sel["app.kubernetes.io/name"] {
		t.Errorf("selector %v does not select the template's labels %v", sel, d.Spec.Template.Labels)
	}
}

// TestRoleIsLeastPrivilege: the Role grants exactly what the controller
// needs, by name wherever Kubernetes allows, and the names are those the
// Deployment's flags give.
func TestRoleIsLeastPrivilege(t *testing.T) {
	objs := objects(t)
	role := one[*rbacv1.Role](t, objs, "Role")
	d := one[*appsv1.Deployment](t, objs, "Deployment")
	args := d.Spec.Template.Spec.Containers[0].Args
	name := func(flag string) string {
		v, ok := flagValue(args, flag)
		if !ok {
			t.Fatalf("the Deployment has no --%s", flag)
		}
		return v
	}
	lease, cfg, published := name("lease-name"), name("config-configmap"), name("published-configmap")

	type key struct{ group, resource, name string }
	got := map[key][]string{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				names := r.ResourceNames
				if len(names) == 0 {
					names = []string{""}
				}
				for _, n := range names {
					k := key{g, res, n}
					got[k] = append(got[k], r.Verbs...)
				}
			}
		}
		for _, v := range append(append(append([]string{}, r.Verbs...), r.APIGroups...), r.Resources...) {
			if v == "*" {
				t.Errorf("wildcard in rule %+v", r)
			}
		}
	}
	want := map[key][]string{
		{"coordination.k8s.io", "leases", lease}: {"get", "list", "watch", "update"},
		{"coordination.k8s.io", "leases", ""}:    {"create"},
		{"", "configmaps", cfg}:                  {"list", "watch"},
		{"", "configmaps", published}:            {"get", "update"},
		{"", "configmaps", ""}:                   {"create"},
		{"", "pods", ""}:                         {"list", "watch"},
	}
	for k, verbs := range want {
		g := slices.Clone(got[k])
		slices.Sort(g)
		w := slices.Clone(verbs)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			t.Errorf("%+v: verbs %v, want %v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected grant %+v: %v", k, got[k])
		}
	}
}

func TestRoleBinding(t *testing.T) {
	objs := objects(t)
	rb := one[*rbacv1.RoleBinding](t, objs, "RoleBinding")
	role := one[*rbacv1.Role](t, objs, "Role")
	sa := one[*corev1.ServiceAccount](t, objs, "ServiceAccount")
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name || rb.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("roleRef %+v", rb.RoleRef)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != sa.Name || rb.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("subjects %+v", rb.Subjects)
	}
}

func TestSampleConfigIsValid(t *testing.T) {
	objs := objects(t)
	cm := one[*corev1.ConfigMap](t, objs, "ConfigMap")
	d := one[*appsv1.Deployment](t, objs, "Deployment")
	if v, _ := flagValue(d.Spec.Template.Spec.Containers[0].Args, "config-configmap"); v != cm.Name {
		t.Errorf("the Deployment reads ConfigMap %q, the sample is %q", v, cm.Name)
	}
	if _, _, err := config.Load([]byte(cm.Data["config.yaml"])); err != nil {
		t.Errorf("sample configuration: %v", err)
	}
}

func TestFileRefusesUnknownNames(t *testing.T) {
	if _, err := deploy.File("../go.mod"); err == nil {
		t.Error("File read outside the manifests")
	}
}

// TestNetworkPolicy: the policy selects the Deployment's pods and lets no
// ingress in (the kubelet's probes come from the node, which a policy does
// not block).
func TestNetworkPolicy(t *testing.T) {
	objs := objects(t)
	np := one[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy")
	d := one[*appsv1.Deployment](t, objs, "Deployment")
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the policy selects %s=%s, the pods are labelled %v", k, v, d.Spec.Template.Labels)
		}
	}
	if len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Error("the policy selects every pod of the namespace")
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || len(np.Spec.Ingress) != 0 {
		t.Errorf("policy types %v with %d ingress rules, want Ingress with none", np.Spec.PolicyTypes, len(np.Spec.Ingress))
	}
}
