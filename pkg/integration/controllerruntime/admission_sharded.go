package controllerruntime

import (
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// ShardedAdmissionFence describes the API server's fence of one sharded controller's
// writes: a ValidatingAdmissionPolicy whose parameters are the shard Leases of the
// controller's ring, and one binding per shard (see NewShardedAdmissionFence).
type ShardedAdmissionFence struct {
	// Name names the policy; the binding of shard i is "<Name>-<i>". Required.
	Name string
	// Ring is the ring's name: ShardedController.Sharding.Name, which defaults to the
	// controller's Name. Required.
	Ring string
	// Namespace is the namespace of the ring's Leases: ShardedController.Sharding.Namespace.
	// Required. The fence covers objects in every namespace against these Leases.
	Namespace string
	// Shards is the ring's number of shards, ShardedController.Sharding.Shards: 0 means
	// sharding.DefaultShards, as there. A write naming a shard Lease beyond them is not
	// judged, so keep it equal to the ring's.
	Shards int
	// Users are the usernames the controller writes as, as AdmissionFence.Users. Required.
	Users []string
	// Resources are the resources fenced, as AdmissionFence.Resources. At least one.
	Resources []schema.GroupResource
	// NamespaceSelector, if set, narrows the fence to the namespaces it selects.
	NamespaceSelector *metav1.LabelSelector
}

// shardFenceGroup is the number of shards of a ring that one policy of its fence
// covers (NewShardedAdmissionFence).
const shardFenceGroup = 8

// NewShardedAdmissionFence returns the ValidatingAdmissionPolicies and their
// bindings, one binding per shard, that make the API server refuse a write of f.Users
// to f.Resources that names a shard Lease of the ring (ShardLeaseAnnotation) unless it
// carries that Lease's token of the current term: ShardHolderAnnotation and
// ShardAcquiredAnnotation equal to the Lease's holderIdentity and acquireTime (for a
// DELETE, on the object deleted, which the fenced client stamps first). The fenced
// client stamps the three on every write of a sharded controller's reconcile when
// Options.ServerSideFence is set. Writes naming no shard Lease (a leader-only term's,
// or unstamped ones) are not judged by it, so it sits beside NewAdmissionFence's
// policy for the same users and resources. Errors wrap ErrInvalidOptions and name the
// field.
//
// The policies: one per group of up to 8 consecutive shards ("<Name>-shards-<first>-
// <last>"), each selecting only the objects marked with a Lease of its group
// (ShardFenceLabel), with one binding per shard ("<Name>-<i>") that names that
// shard's Lease. While a shard Lease does not exist every write to the objects marked
// with it is refused, anyone's, and writes to other objects pass. Install all the
// policies and bindings returned. See docs/design/controllerruntime.md, # The API
// server's fence, for why a binding per shard and policies per group, what it
// covers, the window it leaves and its cost.
func NewShardedAdmissionFence(f ShardedAdmissionFence) ([]*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	shards, rules, err := f.check()
	if err != nil {
		return nil, nil, err
	}
	var policies []*admissionv1.ValidatingAdmissionPolicy
	bindings := make([]*admissionv1.ValidatingAdmissionPolicyBinding, 0, shards)
	for first := 0; first < shards; first += shardFenceGroup {
		last := min(shards, first+shardFenceGroup) - 1
		leases := make([]string, 0, last-first+1)
		for i := first; i <= last; i++ {
			leases = append(leases, sharding.ShardLeaseName(f.Ring, i))
		}
		policy := f.policy(fmt.Sprintf("%s-shards-%d-%d", f.Name, first, last), rules, leases)
		policies = append(policies, policy)
		for i, lease := range leases {
			bindings = append(bindings, leaseBinding(fmt.Sprintf("%s-%d", f.Name, first+i), policy.Name, lease, f.Namespace, nil, ShardFenceLabel))
		}
	}
	return policies, bindings, nil
}

// check checks f and returns the ring's number of shards and the policies' rules.
// Its errors wrap ErrInvalidOptions and name the field.
func (f ShardedAdmissionFence) check() (int, []admissionv1.NamedRuleWithOperations, error) {
	shards := f.Shards
	if shards == 0 {
		shards = sharding.DefaultShards
	}
	switch {
	case f.Name == "":
		return 0, nil, fmt.Errorf("%w: ShardedAdmissionFence.Name is empty", ErrInvalidOptions)
	case f.Ring == "":
		return 0, nil, fmt.Errorf("%w: ShardedAdmissionFence.Ring is empty; set it to the ring's name (ShardedController.Sharding.Name, or the controller's Name)", ErrInvalidOptions)
	case f.Namespace == "":
		return 0, nil, fmt.Errorf("%w: ShardedAdmissionFence.Namespace is empty; set it to ShardedController.Sharding.Namespace", ErrInvalidOptions)
	case shards < 1 || shards > sharding.MaxShards:
		return 0, nil, fmt.Errorf("%w: ShardedAdmissionFence.Shards is %d; want the ring's, 1 to %d (0: %d)", ErrInvalidOptions, f.Shards, sharding.MaxShards, sharding.DefaultShards)
	}
	rules, err := fenceRules("ShardedAdmissionFence", f.Users, f.Resources)
	if err != nil {
		return 0, nil, err
	}
	if err := labelValue("ShardedAdmissionFence.Ring's shard Lease name", sharding.ShardLeaseName(f.Ring, shards-1)); err != nil {
		return 0, nil, err
	}
	return shards, rules, nil
}

// policy returns the fence's policy named name, judging writes to rules of the
// objects marked with one of leases (see NewShardedAdmissionFence).
//
// It has no match conditions: the API server evaluates a policy's match conditions,
// its validations and their messages each in an activation of its own, and building
// one converts the parameter, the request and the namespace for CEL, most of what
// judging a write costs. The conditions are the variable judged instead, which each
// validation passes when false.
func (f ShardedAdmissionFence) policy(name string, rules []admissionv1.NamedRuleWithOperations, leases []string) *admissionv1.ValidatingAdmissionPolicy {
	names := func(obj string) string {
		return "has(" + obj + ".metadata.annotations) && '" + ShardLeaseAnnotation + "' in " + obj + ".metadata.annotations && " +
			obj + ".metadata.annotations['" + ShardLeaseAnnotation + "'] == params.metadata.name"
	}
	p := leasePolicy(name, rules, nil,
		[]admissionv1.Variable{
			{Name: "meta", Expression: target + ".metadata"},
			{Name: "lease", Expression: annotationOrEmpty(ShardLeaseAnnotation)},
			{Name: "holder", Expression: annotationOrEmpty(ShardHolderAnnotation)},
			{Name: "acquired", Expression: annotationOrEmpty(ShardAcquiredAnnotation)},
			// The controller's writes naming this binding's shard Lease, or over an
			// object that named it: sharded reconciles stamp the shard Lease once
			// Options.ServerSideFence is on, so the policy can be installed first,
			// and a write that drops the stamp is judged.
			{Name: "judged", Expression: "request.userInfo.username in " + celList(f.Users) + " && (" +
				"(request.operation != 'DELETE' && " + names("object") + ") || " +
				"(request.operation != 'CREATE' && " + names("oldObject") + "))"},
			{Name: "held", Expression: "has(params.spec.holderIdentity) && params.spec.holderIdentity != '' && has(params.spec.acquireTime)"},
		},
		[]admissionv1.Validation{
			{
				Expression:        "!variables.judged || variables.held",
				Reason:            ptr.To(metav1.StatusReasonForbidden),
				MessageExpression: "'" + fenceMessage + " the shard Lease \"' + variables.lease + '\" has no holder: no term of it may write'",
			},
			{
				Expression: "!variables.judged || !variables.held || variables.holder == params.spec.holderIdentity && variables.acquired != '' && " +
					"timestamp(variables.acquired) == timestamp(string(params.spec.acquireTime))",
				Reason: ptr.To(metav1.StatusReasonForbidden),
				MessageExpression: "'" + fenceMessage + " the write carries the term of holder \"' + variables.holder + '\" acquired at \"' + variables.acquired + " +
					"'\" of the shard Lease \"' + variables.lease + '\", which is held by \"' + params.spec.holderIdentity + '\" since \"' + string(params.spec.acquireTime) + '\"'",
			},
		})
	p.Spec.MatchConstraints.NamespaceSelector = f.NamespaceSelector
	p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: ShardFenceLabel, Operator: metav1.LabelSelectorOpIn, Values: leases},
	}}
	return p
}
