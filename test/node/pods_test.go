package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/baton-dev/baton/deploy"
	"github.com/baton-dev/baton/pkg/fence"
)

// The shipped manifests' names (deploy/).
const (
	ns        = "baton"
	leaseName = "baton-leader"
	container = "baton"
	published = "baton-published"
)

// manifests are deploy/'s objects; without the admission fence unless fence.
func manifests(t *testing.T, fence bool) []runtime.Object {
	t.Helper()
	objs, err := deploy.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, o := range objs {
		if o.File == "admission-fence.yaml" && !fence {
			continue
		}
		out = append(out, o.Object)
	}
	return out
}

// shippedDeployment is deploy/deployment.yaml's Deployment.
func shippedDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	for _, o := range manifests(t, false) {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d
		}
	}
	t.Fatal("deploy/ has no Deployment")
	return nil
}

// apply creates the objects, as kubectl apply -k does on an empty cluster.
func (c *cluster) apply(t *testing.T, objs []runtime.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		// An admission policy deleted just before (fresh) still judges writes
		// until the API server's cache of policies catches up: retry a refusal.
		deadline := time.Now().Add(30 * time.Second)
		err := c.create(ctx, o)
		for apierrors.IsForbidden(err) && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			err = c.create(ctx, o)
		}
		if err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
}

func (c *cluster) create(ctx context.Context, o runtime.Object) error {
	cs, opts := c.cs, metav1.CreateOptions{}
	var err error
	switch o := o.(type) {
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Create(ctx, o, opts)
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	case *appsv1.Deployment:
		_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
	default:
		return c.createOther(ctx, o)
	}
	return err
}

// fresh deletes the baton namespace and applies deploy/ without the
// Deployment (and without the admission fence unless fence). Without the fence
// it waits until the API server no longer enforces an earlier test's; with it,
// the fence's cluster-scoped objects are deleted when the test ends, so that
// no test leaves a policy behind.
func (c *cluster) fresh(t *testing.T, withDeployment, fence bool) {
	t.Helper()
	// The fence's objects first, as kubectl delete -k does: its Lease guard
	// holds the namespace's deletion up while it stands.
	c.deleteClusterScoped(t)
	c.deleteNamespace(t, ns)
	var objs []runtime.Object
	for _, o := range manifests(t, fence) {
		if _, ok := o.(*appsv1.Deployment); ok && !withDeployment {
			continue
		}
		objs = append(objs, o)
	}
	c.apply(t, objs)
	c.waitServiceAccount(t)
	if fence {
		t.Cleanup(func() { c.deleteClusterScoped(t) })
	} else {
		c.awaitFenceGone(t)
	}
}

// awaitFenceGone waits until a write the admission fence would refuse (an
// object marked with the fence's label while its Lease does not exist) is
// admitted: the API server may enforce a deleted policy for a while.
func (c *cluster) awaitFenceGone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "node-e2e-fence-probe", Namespace: ns,
		Labels: map[string]string{fence.FenceLabel: leaseName}}}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.cs.CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an earlier test's admission fence is still enforced a minute after its deletion: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := c.cs.CoreV1().ConfigMaps(ns).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitServiceAccount waits until the controller manager has set the namespace
// up: its default ServiceAccount and the kube-root-ca.crt ConfigMap that
// every pod's service account volume mounts.
func (c *cluster) waitServiceAccount(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		_, errSA := c.cs.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		_, errCA := c.cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "kube-root-ca.crt", metav1.GetOptions{})
		if errSA == nil && errCA == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the namespace's default ServiceAccount or kube-root-ca.crt not there within 1m: is kube-controller-manager running?")
}

// podOptions vary a pod of `baton run` from the shipped template.
type podOptions struct {
	deathSignal bool
	oomAfter    time.Duration // --debug-oom-after; 0: off
	memory      string        // the memory limit; "": the template's
}

// batonPod is a pod of the shipped Deployment's template (its securityContext,
// probes, environment and flags), named name, with opts.
func batonPod(t *testing.T, name string, opts podOptions) *corev1.Pod {
	t.Helper()
	tmpl := shippedDeployment(t).Spec.Template.DeepCopy()
	spec := tmpl.Spec
	ct := &spec.Containers[0]
	if !opts.deathSignal {
		ct.Args = append(ct.Args, "--death-signal=false")
	}
	if opts.oomAfter > 0 {
		ct.Args = append(ct.Args, "--debug-oom-after="+opts.oomAfter.String())
	}
	if opts.memory != "" {
		q := resource.MustParse(opts.memory)
		ct.Resources.Limits[corev1.ResourceMemory] = q
		ct.Resources.Requests[corev1.ResourceMemory] = q
	}
	// Bound to the node at once: the pods of these tests need no scheduler.
	spec.NodeName = nodeName(t)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tmpl.Labels},
		Spec:       spec,
	}
}

// nodeName is the name of the cluster's one node.
func nodeName(t *testing.T) string {
	t.Helper()
	nodes, err := node(t).cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("%d nodes, want the one of hack/cluster.sh", len(nodes.Items))
	}
	return nodes.Items[0].Name
}

// run creates the pod and waits until it is Ready.
func (c *cluster) run(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if _, err := c.cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return c.awaitReady(t, pod.Name)
}

// awaitReady waits until the pod is Ready and returns it.
func (c *cluster) awaitReady(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last *corev1.Pod
	for time.Now().Before(deadline) {
		p, err := c.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && ready(p) && runningID(p, container) != "" {
			return p
		}
		last = p
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod %s not Ready within 2m: %s", name, describe(last))
	return nil
}

// describe is the part of a pod's status that says why it does not run.
func describe(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Message)
	}
	for _, s := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "; %s: restarts %d state %+v last %+v", s.Name, s.RestartCount, s.State, s.LastTerminationState)
	}
	return b.String()
}

// pod gets the pod.
func (c *cluster) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := c.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// deletePod deletes the pod at once (grace period 0).
func (c *cluster) deletePod(t *testing.T, name string) {
	t.Helper()
	zero := int64(0)
	err := c.cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
}

// createOther creates the NetworkPolicy and the admission fence's objects.
func (c *cluster) createOther(ctx context.Context, o runtime.Object) error {
	cs, opts := c.cs, metav1.CreateOptions{}
	var err error
	switch o := o.(type) {
	case *networkingv1.NetworkPolicy:
		_, err = cs.NetworkingV1().NetworkPolicies(o.Namespace).Create(ctx, o, opts)
	case *admissionv1.ValidatingAdmissionPolicy:
		_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, opts)
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, opts)
	default:
		return fmt.Errorf("no client for %T", o)
	}
	return err
}

// deleteClusterScoped deletes the admission fence's cluster-scoped objects.
func (c *cluster) deleteClusterScoped(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, o := range manifests(t, true) {
		var err error
		switch o := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			err = c.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			err = c.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}
