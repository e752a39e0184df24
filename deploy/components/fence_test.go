package components_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
)

// fenceFile is the optional fence Component's policy and binding.
var fenceFile = filepath.Join("baton-fence", "admission-fence.yaml")

// fenceHeader is the comment fenceFile starts with.
const fenceHeader = `# The API server's fence of the controller's writes (generated: see
# kustomization.yaml beside this file; regenerate it for your names with
# controllerruntime.NewAdmissionFence, or run this directory's tests with
# BATON_UPDATE_COMPONENTS=1 after changing them in fence_test.go).
`

// sampleFence is the fence of the scaffold-shaped project: its Lease (the scaffold's
// LeaderElectionID), its manager's ServiceAccount, the ConfigMaps it writes.
var sampleFence = batoncr.AdmissionFence{
	Name:           "baton-fence", // config/default's namePrefix makes it project-baton-fence
	LeaseName:      "3f9d2ab1.my.domain",
	LeaseNamespace: managerNamespace,
	Users:          []string{"system:serviceaccount:" + managerNamespace + ":" + serviceAccount},
	Resources:      []schema.GroupResource{{Resource: "configmaps"}},
}

// TestFenceComponentIsNewAdmissionFence: the optional fence Component's policy and
// binding are NewAdmissionFence's for the sample project, and rendered they keep the
// binding's reference to the policy and the Lease's namespace.
func TestFenceComponentIsNewAdmissionFence(t *testing.T) {
	policy, binding, err := batoncr.NewAdmissionFence(sampleFence)
	if err != nil {
		t.Fatal(err)
	}
	p, err := yaml.Marshal(policy)
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(binding)
	if err != nil {
		t.Fatal(err)
	}
	want := fenceHeader + "---\n" + string(p) + "---\n" + string(b)
	if os.Getenv("BATON_UPDATE_COMPONENTS") == "1" {
		if err := os.WriteFile(fenceFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(fenceFile)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%s has %d documents, want the policy and the binding", fenceFile, len(docs)-1)
	}
	var gotPolicy admissionv1.ValidatingAdmissionPolicy
	var gotBinding admissionv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &gotPolicy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &gotBinding); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&gotPolicy, policy) || !equality.Semantic.DeepEqual(&gotBinding, binding) {
		t.Fatalf("%s differs from NewAdmissionFence's output; regenerate it (BATON_UPDATE_COMPONENTS=1)", fenceFile)
	}

	objs := render(t, filepath.Join("testdata", "project", "config", "fenced"))
	rp := only[*admissionv1.ValidatingAdmissionPolicy](t, objs, "")
	rb := only[*admissionv1.ValidatingAdmissionPolicyBinding](t, objs, "")
	if rp.Name != "project-"+policy.Name || rb.Spec.PolicyName != rp.Name {
		t.Errorf("rendered policy %q and binding of policy %q, want both project-%s", rp.Name, rb.Spec.PolicyName, policy.Name)
	}
	if rb.Spec.ParamRef == nil || rb.Spec.ParamRef.Namespace != managerNamespace {
		t.Errorf("rendered binding's paramRef %+v, want the Lease in %s", rb.Spec.ParamRef, managerNamespace)
	}
}
