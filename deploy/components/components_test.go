package components_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// project is the scaffold-shaped project's config/default, which lists the
// baton Component.
var project = filepath.Join("testdata", "project", "config", "default")

// releaseMargin is the time a stopping replica needs after its terms' work
// returned: releasing its Leases is a write each.
const releaseMargin = 10 * time.Second

// decode decodes every document of a multi-document YAML stream with
// client-go's scheme.
func decode(t *testing.T, raw []byte) []runtime.Object {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatal(err)
		}
		if len(probe) == 0 { // only comments
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode %s: %v", doc, err)
		}
		out = append(out, obj)
	}
}

// render runs kustomize on dir and decodes its output: the kustomize on PATH
// (hack/test.sh puts the pinned one there, hack/kustomize.sh), else kubectl's.
func render(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	var cmd *exec.Cmd
	if kustomize, err := exec.LookPath("kustomize"); err == nil {
		cmd = exec.Command(kustomize, "build", dir)
	} else if kubectl, err := exec.LookPath("kubectl"); err == nil {
		cmd = exec.Command(kubectl, "kustomize", dir)
	} else {
		t.Fatalf("rendering %s needs kustomize (hack/kustomize.sh builds it) or kubectl on PATH", dir)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", strings.Join(cmd.Args[:2], " "), dir, err, stderr.String())
	}
	return decode(t, out)
}

// only returns the one object of type T named name (any name if empty).
func only[T interface {
	runtime.Object
	GetName() string
}](t *testing.T, objs []runtime.Object, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.(T); ok && (name == "" || v.GetName() == name) {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d %T named %q, want 1", len(found), zero, name)
	}
	return found[0]
}

// TestComponentFiles: each Component's kustomization is a Component and lists
// every YAML file of its directory, each of which decodes. It needs no kustomize.
func TestComponentFiles(t *testing.T) {
	for _, dir := range []string{"baton", "baton-fence"} {
		t.Run(dir, func(t *testing.T) { checkComponentFiles(t, dir) })
	}
}

func checkComponentFiles(t *testing.T, dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Patches    []struct {
			Path   string         `json:"path"`
			Target map[string]any `json:"target"`
		} `json:"patches"`
	}
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatal(err)
	}
	if k.Kind != "Component" || k.APIVersion != "kustomize.config.k8s.io/v1alpha1" {
		t.Errorf("%s/kustomization.yaml is %s %s, want a kustomize.config.k8s.io/v1alpha1 Component", dir, k.APIVersion, k.Kind)
	}
	listed := slices.Clone(k.Resources)
	for _, p := range k.Patches {
		listed = append(listed, p.Path)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "kustomization.yaml" {
			continue
		}
		if !slices.Contains(listed, name) {
			t.Errorf("%s is not listed in %s/kustomization.yaml", name, dir)
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(decode(t, raw)) == 0 {
			t.Errorf("%s holds no object", f)
		}
	}
}

// TestComponentRendersIntoTheScaffold renders the scaffold-shaped project with the
// Component and checks what a Baton replica needs in a pod.
func TestComponentRendersIntoTheScaffold(t *testing.T) {
	objs := render(t, project)
	d := only[*appsv1.Deployment](t, objs, "project-controller-manager")
	checkDeployment(t, d)

	// The elections' Role, bound to the manager's ServiceAccount, in its namespace.
	role := only[*rbacv1.Role](t, objs, "project-baton-election")
	rb := only[*rbacv1.RoleBinding](t, objs, "project-baton-election")
	if role.Namespace != d.Namespace || rb.Namespace != d.Namespace {
		t.Errorf("Role in %q, RoleBinding in %q, want the manager's namespace %q", role.Namespace, rb.Namespace, d.Namespace)
	}
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name {
		t.Errorf("roleRef %+v, want Role %s", rb.RoleRef, role.Name)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" ||
		rb.Subjects[0].Name != d.Spec.Template.Spec.ServiceAccountName || rb.Subjects[0].Namespace != d.Namespace {
		t.Errorf("subjects %+v, want the Deployment's ServiceAccount %s/%s", rb.Subjects, d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	}
	for _, want := range []struct{ group, resource, verb string }{
		{"coordination.k8s.io", "leases", "get"}, {"coordination.k8s.io", "leases", "list"},
		{"coordination.k8s.io", "leases", "watch"}, {"coordination.k8s.io", "leases", "create"},
		{"coordination.k8s.io", "leases", "update"}, {"coordination.k8s.io", "leases", "delete"},
		{"", "pods", "list"}, {"", "pods", "watch"},
		{"", "events", "create"}, {"events.k8s.io", "events", "create"},
	} {
		if !grants(role.Rules, want.group, want.resource, want.verb) {
			t.Errorf("the Role does not grant %s on %s.%s", want.verb, want.resource, want.group)
		}
	}

	pdb := only[*policyv1.PodDisruptionBudget](t, objs, "project-controller-manager")
	if pdb.Namespace != d.Namespace {
		t.Errorf("PodDisruptionBudget in %q, want %q", pdb.Namespace, d.Namespace)
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%s, the pods are labelled %v", k, v, d.Spec.Template.Labels)
		}
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() < 1 ||
		int32(pdb.Spec.MaxUnavailable.IntValue()) >= *d.Spec.Replicas {
		t.Errorf("maxUnavailable %v with %d replicas: want at least 1, and fewer than the replicas", pdb.Spec.MaxUnavailable, *d.Spec.Replicas)
	}
}

// checkDeployment checks the manager's Deployment after the Component's patch.
func checkDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas %v, want more than one", d.Spec.Replicas)
	}
	spec := d.Spec.Template.Spec
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if grace < batoncr.DefaultGracefulShutdownTimeout+releaseMargin {
		t.Errorf("terminationGracePeriodSeconds %v: a term's stop may take the Runtime's GracefulShutdownTimeout (%v) and the Leases' release after it: want at least %v",
			grace, batoncr.DefaultGracefulShutdownTimeout, batoncr.DefaultGracefulShutdownTimeout+releaseMargin)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want the scaffold's one", len(spec.Containers))
	}
	c := spec.Containers[0]
	fieldRefs, literal := map[string]string{}, map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldRefs[e.Name] = e.ValueFrom.FieldRef.FieldPath
		} else {
			literal[e.Name] = e.Value
		}
	}
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid"} {
		if fieldRefs[name] != path {
			t.Errorf("env %s from %q, want the Downward API's %s", name, fieldRefs[name], path)
		}
	}
	// A wrong name proves nothing: every crash would be waited out.
	if literal["CONTAINER_NAME"] != c.Name {
		t.Errorf("CONTAINER_NAME %q, want the container's name %q", literal["CONTAINER_NAME"], c.Name)
	}
	if p := c.TerminationMessagePath; p != "" && p != corev1.TerminationMessagePathDefault {
		t.Errorf("terminationMessagePath %q: the Runtime writes its nonce to %s unless told", p, corev1.TerminationMessagePathDefault)
	}
	// The scaffold's own parts survive the patch.
	if !slices.Contains(c.Args, "--leader-elect") || c.LivenessProbe == nil {
		t.Errorf("the patch lost the scaffold's args %v or probes", c.Args)
	}
}

// grants reports whether rules allow verb on group/resource.
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) && len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}
