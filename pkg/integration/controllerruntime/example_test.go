package controllerruntime_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/termctx"
)

// A fenced client refuses a write made outside any leader term: only the contexts the
// Runtime hands to Reconcile and to leader-only functions carry a term.
func ExampleNewFencedClient() {
	c := batoncr.NewFencedClient(fake.NewClientBuilder().Build())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}}
	err := c.Create(context.Background(), cm)
	fmt.Println(errors.Is(err, batoncr.ErrNoTerm))
	fmt.Println(err)
	_, ok := termctx.FromContext(context.Background())
	fmt.Println("term outside a leader run:", ok)
	// Output:
	// true
	// controllerruntime: write outside a leader term (build the controller with controllerruntime.NewControllerManagedBy(rt.Manager()), not ctrl.NewControllerManagedBy, and write with the context Reconcile was given)
	// term outside a leader run: false
}

// The API server's fence of a controller that writes ConfigMaps as its ServiceAccount,
// judged against its Lease: create the policy and the binding (cluster-scoped; an
// administrator installs them), then turn Options.ServerSideFence on.
func ExampleNewAdmissionFence() {
	policy, binding, err := batoncr.NewAdmissionFence(batoncr.AdmissionFence{
		Name:           "my-controller-fence",
		LeaseName:      "my-controller",
		LeaseNamespace: "my-namespace",
		Users:          []string{"system:serviceaccount:my-namespace:my-controller"},
		Resources:      []schema.GroupResource{{Group: "", Resource: "configmaps"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(policy.Kind, policy.Name, "on", policy.Spec.ParamKind.Kind)
	fmt.Println(binding.Kind, binding.Name, "param", binding.Spec.ParamRef.Namespace+"/"+binding.Spec.ParamRef.Name)
	fmt.Println("stamps judged:", batoncr.HolderAnnotation, batoncr.AcquiredAnnotation)
	// Output:
	// ValidatingAdmissionPolicy my-controller-fence on Lease
	// ValidatingAdmissionPolicyBinding my-controller-fence param my-namespace/my-controller
	// stamps judged: baton.dev/lease-holder baton.dev/lease-acquired
}

// The API server's fence of a sharded controller's ring of 10 shards, whose Leases are
// in my-namespace: a policy per group of up to 8 shards, selecting the objects marked
// with its shards' Leases, and one binding per shard Lease, under its group's policy.
// Create them all, then turn Options.ServerSideFence on.
func ExampleNewShardedAdmissionFence() {
	policies, bindings, err := batoncr.NewShardedAdmissionFence(batoncr.ShardedAdmissionFence{
		Name:      "my-ring-fence",
		Ring:      "my-ring",
		Namespace: "my-namespace",
		Shards:    10,
		Users:     []string{"system:serviceaccount:my-namespace:my-controller"},
		Resources: []schema.GroupResource{{Group: "", Resource: "configmaps"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range policies {
		sel := p.Spec.MatchConstraints.ObjectSelector.MatchExpressions[0]
		fmt.Println(p.Kind, p.Name, "on", p.Spec.ParamKind.Kind, "for", sel.Key, sel.Operator, sel.Values)
	}
	for _, b := range bindings {
		fmt.Println(b.Kind, b.Name, "of", b.Spec.PolicyName, "param", b.Spec.ParamRef.Namespace+"/"+b.Spec.ParamRef.Name)
	}
	fmt.Println("stamps judged:", batoncr.ShardLeaseAnnotation, batoncr.ShardHolderAnnotation, batoncr.ShardAcquiredAnnotation)
	// Output:
	// ValidatingAdmissionPolicy my-ring-fence-shards-0-7 on Lease for baton.dev/shard-fence-lease In [my-ring-shard-0 my-ring-shard-1 my-ring-shard-2 my-ring-shard-3 my-ring-shard-4 my-ring-shard-5 my-ring-shard-6 my-ring-shard-7]
	// ValidatingAdmissionPolicy my-ring-fence-shards-8-9 on Lease for baton.dev/shard-fence-lease In [my-ring-shard-8 my-ring-shard-9]
	// ValidatingAdmissionPolicyBinding my-ring-fence-0 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-0
	// ValidatingAdmissionPolicyBinding my-ring-fence-1 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-1
	// ValidatingAdmissionPolicyBinding my-ring-fence-2 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-2
	// ValidatingAdmissionPolicyBinding my-ring-fence-3 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-3
	// ValidatingAdmissionPolicyBinding my-ring-fence-4 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-4
	// ValidatingAdmissionPolicyBinding my-ring-fence-5 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-5
	// ValidatingAdmissionPolicyBinding my-ring-fence-6 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-6
	// ValidatingAdmissionPolicyBinding my-ring-fence-7 of my-ring-fence-shards-0-7 param my-namespace/my-ring-shard-7
	// ValidatingAdmissionPolicyBinding my-ring-fence-8 of my-ring-fence-shards-8-9 param my-namespace/my-ring-shard-8
	// ValidatingAdmissionPolicyBinding my-ring-fence-9 of my-ring-fence-shards-8-9 param my-namespace/my-ring-shard-9
	// stamps judged: baton.dev/shard-lease baton.dev/shard-lease-holder baton.dev/shard-lease-acquired
}
