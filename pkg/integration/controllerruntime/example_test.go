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

// The API server's fence of a sharded controller's ring of 4 shards, whose Leases are
// in my-namespace: one policy, and one binding per shard Lease. Create them once the
// ring's Leases exist (while one is missing every write of those users to those
// resources is refused), then turn Options.ServerSideFence on.
func ExampleNewShardedAdmissionFence() {
	policy, bindings, err := batoncr.NewShardedAdmissionFence(batoncr.ShardedAdmissionFence{
		Name:      "my-ring-fence",
		Ring:      "my-ring",
		Namespace: "my-namespace",
		Shards:    4,
		Users:     []string{"system:serviceaccount:my-namespace:my-controller"},
		Resources: []schema.GroupResource{{Group: "", Resource: "configmaps"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(policy.Kind, policy.Name, "on", policy.Spec.ParamKind.Kind)
	for _, b := range bindings {
		fmt.Println(b.Kind, b.Name, "param", b.Spec.ParamRef.Namespace+"/"+b.Spec.ParamRef.Name)
	}
	fmt.Println("stamps judged:", batoncr.ShardLeaseAnnotation, batoncr.ShardHolderAnnotation, batoncr.ShardAcquiredAnnotation)
	// Output:
	// ValidatingAdmissionPolicy my-ring-fence on Lease
	// ValidatingAdmissionPolicyBinding my-ring-fence-0 param my-namespace/my-ring-shard-0
	// ValidatingAdmissionPolicyBinding my-ring-fence-1 param my-namespace/my-ring-shard-1
	// ValidatingAdmissionPolicyBinding my-ring-fence-2 param my-namespace/my-ring-shard-2
	// ValidatingAdmissionPolicyBinding my-ring-fence-3 param my-namespace/my-ring-shard-3
	// stamps judged: baton.dev/shard-lease baton.dev/shard-lease-holder baton.dev/shard-lease-acquired
}
