package controllerruntime

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// LeaseGuard describes a ValidatingAdmissionPolicy that keeps the Leases of the API
// server's fences from being deleted (see NewLeaseGuard).
type LeaseGuard struct {
	// Name names the policy and its binding. Required.
	Name string
	// Namespace is the Leases' namespace. Required.
	Namespace string
	// Leases are the names of the Leases guarded: AdmissionFence.LeaseName, and each
	// shard Lease of a ring (sharding.ShardLeaseName(ring, i) for i below Shards). At
	// least one.
	Leases []string
}

// NewLeaseGuard returns the ValidatingAdmissionPolicy and its binding that make the
// API server refuse the deletion of g.Leases, by anyone, unless their namespace is
// being deleted. While a fence's Lease does not exist, its binding refuses every write
// to the objects its fence marked (FenceLabel, ShardFenceLabel), people's and other
// controllers' included (see docs/design/controllerruntime.md, # The API server's fence); so the Lease
// must not go. The elector never deletes a Lease (a release empties its holder). Errors
// wrap ErrInvalidOptions and name the field.
//
// A namespace being deleted may delete its Leases: the namespace controller deletes
// every object in it, in no set order. If a fence's Lease goes before the objects its
// fence marked in the same namespace, their deletion is refused and the namespace
// waits; delete the fence's binding (or the policy) first, as deleting the manifests
// as a whole does (kubectl delete -k).
func NewLeaseGuard(g LeaseGuard) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	switch {
	case g.Name == "":
		return nil, nil, fmt.Errorf("%w: LeaseGuard.Name is empty", ErrInvalidOptions)
	case g.Namespace == "":
		return nil, nil, fmt.Errorf("%w: LeaseGuard.Namespace is empty; set it to the fence's Lease namespace", ErrInvalidOptions)
	case len(g.Leases) == 0:
		return nil, nil, fmt.Errorf("%w: LeaseGuard.Leases is empty; name the fences' Leases", ErrInvalidOptions)
	}
	for i, l := range g.Leases {
		if l == "" || strings.ContainsAny(l, `'\`) {
			return nil, nil, fmt.Errorf("%w: LeaseGuard.Leases[%d] %q: want a Lease name", ErrInvalidOptions, i, l)
		}
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: g.Name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			// By a condition on the Lease deleted, not by resourceNames: the API
			// server judges each item of a DeleteCollection with the collection's
			// request, which names no object.
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "fence-leases", Expression: "oldObject.metadata.name in " + celList(g.Leases)},
			},
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": g.Namespace}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Delete},
						Rule: admissionv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"*"},
							Resources: []string{"leases"}, Scope: ptr.To(admissionv1.NamespacedScope)},
					},
				}},
			},
			Validations: []admissionv1.Validation{{
				Expression: "namespaceObject.status.phase == 'Terminating'",
				Reason:     ptr.To(metav1.StatusReasonForbidden),
				MessageExpression: "'" + fenceMessage + " the Lease \"' + oldObject.metadata.name + '\" is the parameter of a fence: " +
					"while it does not exist, every write to the objects the fence marked is refused'",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: g.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        g.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return policy, binding, nil
}
