package controllerruntime

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// impersonated returns a client that writes as user.
func impersonated(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := shared.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeBoth creates the ConfigMap ns/name as c (labelled and stamped with s) and then
// updates it, and returns the first error.
func writeBoth(c client.Client, ns, name string, s stamps) error {
	ctx := context.Background()
	cm := configMap(ns, name)
	s.stamp(cm)
	if err := c.Create(ctx, cm); err != nil {
		return err
	}
	cm.Data["k"] = "updated"
	return c.Update(ctx, cm)
}

// TestAdmissionFenceWithoutTheLease (issue 25, 7): while the fence's Lease does not
// exist (the policy installed before the first election, or the Lease deleted), a write
// to an object no fenced write marked is never refused, whoever sends it: an
// administrator's create and update of an unmarked ConfigMap (as the
// kube-controller-manager writes kube-root-ca.crt into every namespace), and the
// controller's own write of an unmarked object. Every write to a marked object is
// refused (422), anyone's. Once the Lease exists, with no holder, the administrator's
// writes to the marked object pass and the controller's stamped writes are refused.
// Before the object selector, the administrator's create of an unmarked ConfigMap was
// refused.
func TestAdmissionFenceWithoutTheLease(t *testing.T) {
	raw := newClient(t)
	ns := newNamespace(t, raw)
	ctx := context.Background()
	writer := impersonated(t, fenceWriter)
	marked := configMap(ns, "marked")
	marked.Labels = map[string]string{FenceLabel: "fence"}
	if err := raw.Create(ctx, marked); err != nil {
		t.Fatal(err)
	}
	policy, binding, err := NewAdmissionFence(AdmissionFence{
		Name: "baton-fence-" + ns, LeaseName: "fence", LeaseNamespace: ns, Users: []string{fenceWriter},
		Resources:         []schema.GroupResource{{Resource: "configmaps"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
	})
	if err != nil {
		t.Fatal(err)
	}
	installFence(t, raw, policy, []client.Object{binding})
	markedWrite := func(c client.Client) error {
		cm := configMap(ns, "probe")
		cm.Labels = map[string]string{FenceLabel: "fence"}
		return c.Create(ctx, cm, client.DryRunAll)
	}
	waitForPolicy(t, func() bool { return apierrors.IsInvalid(markedWrite(raw)) })

	if err := writeBoth(raw, ns, "kube-root-ca.crt", stamps{}); err != nil {
		t.Errorf("an administrator's create and update of an unmarked ConfigMap while the Lease does not exist: %v", err)
	}
	if err := writeBoth(writer, ns, "unmarked", stamps{HolderAnnotation: "a", AcquiredAnnotation: "2000-01-01T00:00:00.000000Z"}); err != nil {
		t.Errorf("the controller's write of an unmarked ConfigMap while the Lease does not exist: %v", err)
	}
	update := func(c client.Client) error {
		var cm corev1.ConfigMap
		if err := raw.Get(ctx, client.ObjectKeyFromObject(marked), &cm); err != nil {
			return err
		}
		cm.Data["k"] = "admin"
		return c.Update(ctx, &cm)
	}
	for who, c := range map[string]client.Client{"an administrator": raw, "the controller": writer} {
		if err := update(c); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "no params found") {
			t.Errorf("%s's update of a marked ConfigMap while the Lease does not exist: %v, want 422 (no params found)", who, err)
		}
	}
	// The Lease created, released: the administrator's writes pass again, the
	// controller's stamped ones are refused for want of a holder.
	if err := raw.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fence"}}); err != nil {
		t.Fatal(err)
	}
	waitForPolicy(t, func() bool { return update(raw) == nil })
	stamped := configMap(ns, "probe")
	stamps{HolderAnnotation: "a", AcquiredAnnotation: "2000-01-01T00:00:00.000000Z", FenceLabel: "fence"}.stamp(stamped)
	if err := writer.Create(ctx, stamped, client.DryRunAll); !isFenceDenial(err) || !strings.Contains(err.Error(), "no holder") {
		t.Errorf("the controller's stamped write with a released Lease: %v, want the fence to refuse it for want of a holder", err)
	}
}

// TestLeaseGuard: NewLeaseGuard's policy refuses deleting a fence's Lease, an
// administrator's delete included, and lets the Lease go with its namespace.
func TestLeaseGuard(t *testing.T) {
	raw := newClient(t)
	ns := newNamespace(t, raw)
	ctx := context.Background()
	leases := shared.Clientset().CoordinationV1().Leases(ns)
	for _, name := range []string{"fence", "other"} {
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policy, binding, err := NewLeaseGuard(LeaseGuard{Name: "baton-fence-lease-" + ns, Namespace: ns, Leases: []string{"fence"}})
	if err != nil {
		t.Fatal(err)
	}
	installFence(t, raw, policy, []client.Object{binding})
	dryDelete := func(name string) error {
		return leases.Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}
	waitForPolicy(t, func() bool { return isFenceDenial(dryDelete("fence")) })
	if err := dryDelete("other"); err != nil {
		t.Errorf("deleting a Lease the guard does not name: %v", err)
	}
	if err := leases.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}, metav1.ListOptions{}); !isFenceDenial(err) {
		t.Errorf("deleting every Lease of the namespace: %v, want the guard to refuse it", err)
	}
	// The namespace deleted: its Leases may go (no namespace controller runs here, so
	// the namespace stays Terminating and the test deletes the Lease itself).
	if err := raw.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	waitForPolicy(t, func() bool { return dryDelete("fence") == nil })
	if err := leases.Delete(ctx, "fence", metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting the fence's Lease with its namespace: %v", err)
	}
}

// TestNewLeaseGuardRefusesBadInput: each missing field is named.
func TestNewLeaseGuardRefusesBadInput(t *testing.T) {
	for field, g := range map[string]LeaseGuard{
		"LeaseGuard.Name":      {Namespace: "ns", Leases: []string{"l"}},
		"LeaseGuard.Namespace": {Name: "n", Leases: []string{"l"}},
		"LeaseGuard.Leases":    {Name: "n", Namespace: "ns"},
		"LeaseGuard.Leases[1]": {Name: "n", Namespace: "ns", Leases: []string{"l", ""}},
	} {
		if _, _, err := NewLeaseGuard(g); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), field) {
			t.Errorf("%+v: %v, want ErrInvalidOptions naming %s", g, err, field)
		}
	}
	if _, _, err := NewAdmissionFence(AdmissionFence{Name: "n", LeaseName: strings.Repeat("l", 64), LeaseNamespace: "ns",
		Users: []string{"u"}, Resources: []schema.GroupResource{{Resource: "configmaps"}}}); !containsField(err, "LeaseName") {
		t.Errorf("a Lease name of 64 characters: %v, want ErrInvalidOptions naming AdmissionFence.LeaseName", err)
	}
}

// deployedFence decodes deploy/admission-fence.yaml: the fence's policy and binding,
// and the guard's.
func deployedFence(t *testing.T) (policy, guard *admissionv1.ValidatingAdmissionPolicy, binding, guardBinding *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	raw, err := os.ReadFile("../../../deploy/admission-fence.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 5 { // the comments, the fence's policy and binding, the guard's
		t.Fatalf("deploy/admission-fence.yaml has %d documents, want the fence's policy and binding and the guard's", len(docs)-1)
	}
	policy, guard = &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicy{}
	binding, guardBinding = &admissionv1.ValidatingAdmissionPolicyBinding{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	for i, into := range []any{policy, binding, guard, guardBinding} {
		if err := yaml.UnmarshalStrict([]byte(docs[i+1]), into); err != nil {
			t.Fatal(err)
		}
	}
	return policy, guard, binding, guardBinding
}

// TestDeployedAdmissionFenceOnTheAPIServer (issue 25, 7): deploy/admission-fence.yaml
// installed on the API server in the namespace baton before the first election (no
// Lease baton-leader): an administrator's create and update of an unmarked ConfigMap
// pass (the kube-controller-manager writes kube-root-ca.crt into every namespace),
// writes to a marked one are refused; once the Lease exists the ServiceAccount's stale
// write is refused, its current one passes, and nobody may delete the Lease.
func TestDeployedAdmissionFenceOnTheAPIServer(t *testing.T) {
	raw := newClient(t)
	ctx := context.Background()
	if err := raw.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "baton"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	policy, guard, binding, guardBinding := deployedFence(t)
	installFence(t, raw, policy, []client.Object{binding})
	installFence(t, raw, guard, []client.Object{guardBinding})
	marked := func(c client.Client, name string, s stamps) error {
		cm := configMap("baton", name)
		s.stamp(cm)
		cm.Labels = map[string]string{FenceLabel: "baton-leader"}
		return c.Create(ctx, cm, client.DryRunAll)
	}
	waitForPolicy(t, func() bool { return apierrors.IsInvalid(marked(raw, "probe", stamps{})) })
	if err := writeBoth(raw, "baton", "kube-root-ca.crt", stamps{}); err != nil {
		t.Errorf("an administrator's create and update of kube-root-ca.crt while the Lease does not exist: %v", err)
	}

	sa := impersonated(t, "system:serviceaccount:baton:baton")
	e := &fenceEnv{t: t, raw: raw, writer: sa, ns: "baton"}
	setLease := func(holder string) { e.setHolderOf("baton-leader", holder) }
	setLease("a")
	waitForPolicy(t, func() bool { return marked(sa, "probe", e.token("a")) == nil })
	setLease("b")
	waitForPolicy(t, func() bool { return isFenceDenial(marked(sa, "probe", e.token("a"))) })
	if err := marked(sa, "probe", e.token("b")); err != nil {
		t.Errorf("the ServiceAccount's write with the current token: %v", err)
	}
	err := shared.Clientset().CoordinationV1().Leases("baton").Delete(ctx, "baton-leader", metav1.DeleteOptions{})
	if !isFenceDenial(err) {
		t.Errorf("an administrator's delete of the fence's Lease: %v, want the guard to refuse it", err)
	}
}
