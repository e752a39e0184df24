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

// NewShardedAdmissionFence returns the ValidatingAdmissionPolicy and its bindings, one
// per shard, that make the API server refuse a write of f.Users to f.Resources that
// names a shard Lease of the ring (ShardLeaseAnnotation) unless it carries that
// Lease's token of the current term: ShardHolderAnnotation and ShardAcquiredAnnotation
// equal to the Lease's holderIdentity and acquireTime (for a DELETE, on the object
// deleted, which the fenced client stamps first). The fenced client stamps the three
// on every write of a sharded controller's reconcile when Options.ServerSideFence is
// set. Writes naming no shard Lease (a leader-only term's, or unstamped ones) are not
// judged by it, so it sits beside NewAdmissionFence's policy for the same users and
// resources. Errors wrap ErrInvalidOptions and name the field.
//
// The binding of shard i takes that shard's Lease by name as its parameter and judges
// only writes naming it; a policy binding names one parameter or selects several by
// label, and only a name makes the API server read a parameter missing from its cache
// from the API itself and apply parameterNotFoundAction Deny to that one Lease. Each
// binding selects only the objects marked with its Lease (ShardFenceLabel), so a write
// passes the binding of its object's shard alone; while a shard Lease does not exist
// every write to the objects marked with it is refused, anyone's (the API server looks
// a binding's parameter up before it evaluates the match conditions), so a stale write
// of a deleted shard Lease is never let through, and writes to other objects pass. See docs/design/controllerruntime.md, # The API server's fence,
// for what it covers and the window it leaves.
func NewShardedAdmissionFence(f ShardedAdmissionFence) (*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	shards := f.Shards
	if shards == 0 {
		shards = sharding.DefaultShards
	}
	switch {
	case f.Name == "":
		return nil, nil, fmt.Errorf("%w: ShardedAdmissionFence.Name is empty", ErrInvalidOptions)
	case f.Ring == "":
		return nil, nil, fmt.Errorf("%w: ShardedAdmissionFence.Ring is empty; set it to the ring's name (ShardedController.Sharding.Name, or the controller's Name)", ErrInvalidOptions)
	case f.Namespace == "":
		return nil, nil, fmt.Errorf("%w: ShardedAdmissionFence.Namespace is empty; set it to ShardedController.Sharding.Namespace", ErrInvalidOptions)
	case shards < 1 || shards > sharding.MaxShards:
		return nil, nil, fmt.Errorf("%w: ShardedAdmissionFence.Shards is %d; want the ring's, 1 to %d (0: %d)", ErrInvalidOptions, f.Shards, sharding.MaxShards, sharding.DefaultShards)
	}
	rules, err := fenceRules("ShardedAdmissionFence", f.Users, f.Resources)
	if err != nil {
		return nil, nil, err
	}
	if err := labelValue("ShardedAdmissionFence.Ring's shard Lease name", sharding.ShardLeaseName(f.Ring, shards-1)); err != nil {
		return nil, nil, err
	}
	policy := f.policy(rules)
	bindings := make([]*admissionv1.ValidatingAdmissionPolicyBinding, shards)
	for i := range bindings {
		lease := sharding.ShardLeaseName(f.Ring, i)
		bindings[i] = leaseBinding(fmt.Sprintf("%s-%d", f.Name, i), f.Name, lease, f.Namespace, f.NamespaceSelector, ShardFenceLabel)
	}
	return policy, bindings, nil
}

// policy returns the fence's policy, judging writes to rules (see
// NewShardedAdmissionFence).
func (f ShardedAdmissionFence) policy(rules []admissionv1.NamedRuleWithOperations) *admissionv1.ValidatingAdmissionPolicy {
	stamped := stampedIn(ShardLeaseAnnotation)
	names := func(obj string) string {
		return "has(" + obj + ".metadata.annotations) && '" + ShardLeaseAnnotation + "' in " + obj + ".metadata.annotations && " +
			obj + ".metadata.annotations['" + ShardLeaseAnnotation + "'] == params.metadata.name"
	}
	return leasePolicy(f.Name, rules,
		[]admissionv1.MatchCondition{
			{Name: "the-controllers-writes", Expression: "request.userInfo.username in " + celList(f.Users)},
			// Only writes of a shard's term, and writes over an object a shard's term
			// wrote: sharded reconciles stamp the shard Lease once
			// Options.ServerSideFence is on, so the policy can be installed first.
			{Name: "shard-stamped-writes", Expression: stamped},
			// Each binding's parameter is one shard Lease: it judges only the writes
			// naming that Lease, or over an object that named it, and skips the
			// others (another binding judges them) before any validation is
			// evaluated.
			{Name: "names-this-shard-lease", Expression: "(request.operation != 'DELETE' && " + names("object") + ") || " +
				"(request.operation != 'CREATE' && " + names("oldObject") + ")"},
		},
		[]admissionv1.Variable{
			{Name: "meta", Expression: target + ".metadata"},
			{Name: "lease", Expression: annotationOrEmpty(ShardLeaseAnnotation)},
			{Name: "holder", Expression: annotationOrEmpty(ShardHolderAnnotation)},
			{Name: "acquired", Expression: annotationOrEmpty(ShardAcquiredAnnotation)},
			{Name: "held", Expression: "has(params.spec.holderIdentity) && params.spec.holderIdentity != '' && has(params.spec.acquireTime)"},
		},
		[]admissionv1.Validation{
			{
				Expression:        "variables.held",
				Reason:            ptr.To(metav1.StatusReasonForbidden),
				MessageExpression: "'" + fenceMessage + " the shard Lease \"' + variables.lease + '\" has no holder: no term of it may write'",
			},
			{
				Expression: "!variables.held || variables.holder == params.spec.holderIdentity && variables.acquired != '' && " +
					"timestamp(variables.acquired) == timestamp(string(params.spec.acquireTime))",
				Reason: ptr.To(metav1.StatusReasonForbidden),
				MessageExpression: "'" + fenceMessage + " the write carries the term of holder \"' + variables.holder + '\" acquired at \"' + variables.acquired + " +
					"'\" of the shard Lease \"' + variables.lease + '\", which is held by \"' + params.spec.holderIdentity + '\" since \"' + string(params.spec.acquireTime) + '\"'",
			},
		})
}
