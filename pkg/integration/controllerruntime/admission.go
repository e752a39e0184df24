package controllerruntime

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// AdmissionFence describes the API server's fence of one controller's writes: a
// ValidatingAdmissionPolicy whose parameter is the controller's Lease, and its binding
// (see NewAdmissionFence).
type AdmissionFence struct {
	// Name names the policy and the binding. Required.
	Name string
	// LeaseName and LeaseNamespace name the Lease (Options.LeaderElectionID and
	// LeaderElectionNamespace). Required. The fence covers objects in every namespace
	// (and cluster-scoped ones) against this one Lease.
	LeaseName, LeaseNamespace string
	// Users are the usernames the controller writes as, e.g.
	// "system:serviceaccount:NAMESPACE:NAME". Required: only their writes are fenced, so
	// that people, the garbage collector and other controllers keep writing the objects.
	Users []string
	// Resources are the resources fenced, e.g. {Group: "", Resource: "configmaps"}. At
	// least one; "*" fences every resource. Subresources are not fenced.
	Resources []schema.GroupResource
	// NamespaceSelector, if set, narrows the fence to the namespaces it selects.
	NamespaceSelector *metav1.LabelSelector
}

// target is the object a write of the fence is judged by: the object written, or for a
// DELETE (which has none) the object deleted, which the fenced client stamped first.
const target = "(request.operation == 'DELETE' ? oldObject : object)"

// stampedIn is the CEL condition that the request's object, or for an UPDATE or a
// DELETE its old object, carries the annotation key: a write is judged when it is
// stamped, and also when it drops the stamp of an object that had it (its result then
// carries no token of the current term, and is refused).
func stampedIn(key string) string {
	has := func(obj string) string {
		return "has(" + obj + ".metadata.annotations) && '" + key + "' in " + obj + ".metadata.annotations"
	}
	return "(request.operation != 'DELETE' && " + has("object") + ") || (request.operation != 'CREATE' && " + has("oldObject") + ")"
}

// fenceMessage starts every refusal of the fence's policy; the fenced client tells
// them by it.
const fenceMessage = "baton fence:"

// NewAdmissionFence returns the ValidatingAdmissionPolicy and its binding that make the
// API server refuse a stamped write of f.Users to f.Resources unless it carries the
// Lease token of the current term: HolderAnnotation and AcquiredAnnotation equal to the
// Lease's holderIdentity and acquireTime (for a DELETE, on the object deleted, which
// the fenced client stamps first), and an UPDATE that drops the token from an object
// that carried it. Runtime.FencedClient stamps every write when
// Options.ServerSideFence is set; writes without HolderAnnotation, of objects without
// it, are not judged, so
// the policy can be installed before the controller turns the option on, and other
// programs' writes of objects the controller never stamped pass. Errors wrap
// ErrInvalidOptions and name the field.
//
// The binding selects only objects a fenced write marked (FenceLabel set to
// f.LeaseName): while the Lease does not exist it refuses every write to those,
// anyone's, and never a write to an object no fenced write marked. It refuses every
// stamped write of f.Users while the Lease has no holder. NewLeaseGuard keeps the
// Lease from being deleted. The fence is cooperative (it stops a stale writer, it
// does not authenticate one) and judges by the old holder for a few milliseconds
// after a hand-over: see docs/design/controllerruntime.md, # The API server's fence.
func NewAdmissionFence(f AdmissionFence) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	rules, err := f.rules()
	if err != nil {
		return nil, nil, err
	}
	policy := leasePolicy(f.Name, rules,
		[]admissionv1.MatchCondition{
			{Name: "the-controllers-writes", Expression: "request.userInfo.username in " + celList(f.Users)},
			// Only stamped writes, and writes over a stamped object: the controller's
			// writes carry the token once Options.ServerSideFence is on, so the policy
			// can be installed first.
			{Name: "stamped-writes", Expression: stampedIn(HolderAnnotation)},
		},
		[]admissionv1.Variable{
			{Name: "meta", Expression: target + ".metadata"},
			{Name: "holder", Expression: annotationOrEmpty(HolderAnnotation)},
			{Name: "acquired", Expression: annotationOrEmpty(AcquiredAnnotation)},
		},
		[]admissionv1.Validation{
			{
				Expression: "has(params.spec.holderIdentity) && params.spec.holderIdentity != '' && has(params.spec.acquireTime)",
				Message:    fenceMessage + " the Lease has no holder: no term may write",
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			},
			{
				Expression: "variables.holder == params.spec.holderIdentity && variables.acquired != '' && " +
					"timestamp(variables.acquired) == timestamp(string(params.spec.acquireTime))",
				Reason: ptr.To(metav1.StatusReasonForbidden),
				MessageExpression: "'" + fenceMessage + " the write carries the term of holder \"' + variables.holder + '\" acquired at \"' + variables.acquired + " +
					"'\", the Lease is held by \"' + params.spec.holderIdentity + '\" since \"' + string(params.spec.acquireTime) + '\"'",
			},
		})
	binding := leaseBinding(f.Name, f.Name, f.LeaseName, f.LeaseNamespace, f.NamespaceSelector, FenceLabel)
	return policy, binding, nil
}

// leasePolicy returns the policy named name, failing closed, whose parameter is a
// Lease, that judges the writes to rules meeting conditions.
func leasePolicy(name string, rules []admissionv1.NamedRuleWithOperations, conditions []admissionv1.MatchCondition,
	variables []admissionv1.Variable, validations []admissionv1.Validation) *admissionv1.ValidatingAdmissionPolicy {
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionv1.Fail),
			ParamKind:        &admissionv1.ParamKind{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
			MatchConditions:  conditions,
			Variables:        variables,
			Validations:      validations,
		},
	}
}

// leaseBinding returns the binding named name of policy to the Lease namespace/lease,
// in the namespaces selector selects (nil: all), of the objects whose label is lease:
// objects a fenced write of a term of that Lease marked. It denies a write of such an
// object while the Lease does not exist.
//
// Why the object selector: the API server matches a binding's matchResources first,
// then looks its parameter up (a missing one denies, by parameterNotFoundAction), and
// evaluates the policy's match conditions last. Without the selector every write to
// the resources in those namespaces, anyone's, was refused while the Lease did not
// exist. With it, a write to an object no fenced write marked passes no binding (for
// an UPDATE the selector matches the old or the new object, so a write that removes
// the label is judged).
func leaseBinding(name, policy, lease, namespace string, selector *metav1.LabelSelector, label string) *admissionv1.ValidatingAdmissionPolicyBinding {
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy,
			ParamRef: &admissionv1.ParamRef{
				Name: lease, Namespace: namespace,
				ParameterNotFoundAction: ptr.To(admissionv1.DenyAction),
			},
			MatchResources: &admissionv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: lease}},
			},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if selector != nil {
		b.Spec.MatchResources.NamespaceSelector = selector
	}
	return b
}

// annotationOrEmpty is the CEL expression of the written object's annotation key, or
// ” when it has none (variables.meta is its metadata).
func annotationOrEmpty(key string) string {
	return "has(variables.meta.annotations) && '" + key + "' in variables.meta.annotations ? variables.meta.annotations['" + key + "'] : ''"
}

// rules checks f and returns the policy's rules: create, update and delete of
// each of f.Resources. Its errors wrap ErrInvalidOptions and name the field.
func (f AdmissionFence) rules() ([]admissionv1.NamedRuleWithOperations, error) {
	switch {
	case f.Name == "":
		return nil, fmt.Errorf("%w: AdmissionFence.Name is empty", ErrInvalidOptions)
	case f.LeaseName == "":
		return nil, fmt.Errorf("%w: AdmissionFence.LeaseName is empty; set it to Options.LeaderElectionID", ErrInvalidOptions)
	case f.LeaseNamespace == "":
		return nil, fmt.Errorf("%w: AdmissionFence.LeaseNamespace is empty; set it to Options.LeaderElectionNamespace", ErrInvalidOptions)
	}
	if err := labelValue("AdmissionFence.LeaseName", f.LeaseName); err != nil {
		return nil, err
	}
	return fenceRules("AdmissionFence", f.Users, f.Resources)
}

// fenceRules checks users and resources, the fields of the struct named what, and
// returns a policy's rules: create, update and delete of each resource. Its errors
// wrap ErrInvalidOptions and name the field.
func fenceRules(what string, users []string, resources []schema.GroupResource) ([]admissionv1.NamedRuleWithOperations, error) {
	switch {
	case len(users) == 0:
		return nil, fmt.Errorf("%w: %s.Users is empty; set it to the controller's usernames (system:serviceaccount:NAMESPACE:NAME)", ErrInvalidOptions, what)
	case len(resources) == 0:
		return nil, fmt.Errorf("%w: %s.Resources is empty; name the resources the controller writes", ErrInvalidOptions, what)
	}
	var rules []admissionv1.NamedRuleWithOperations
	for i, r := range resources {
		if r.Resource == "" || strings.Contains(r.Resource, "/") {
			return nil, fmt.Errorf("%w: %s.Resources[%d].Resource %q: want a resource name without a subresource", ErrInvalidOptions, what, i, r.Resource)
		}
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
			Rule: admissionv1.Rule{APIGroups: []string{r.Group}, APIVersions: []string{"*"},
				Resources: []string{r.Resource}, Scope: ptr.To(admissionv1.AllScopes)},
		}})
	}
	for i, u := range users {
		if u == "" || strings.ContainsAny(u, `'\`) {
			return nil, fmt.Errorf("%w: %s.Users[%d] %q: want a username", ErrInvalidOptions, what, i, u)
		}
	}
	return rules, nil
}

// labelValue refuses a Lease name that cannot be the value of the label that marks
// the objects of its fence (FenceLabel, ShardFenceLabel): at most 63 characters. The
// error wraps ErrInvalidOptions and names field.
func labelValue(field, lease string) error {
	if errs := validation.IsValidLabelValue(lease); len(errs) > 0 {
		return fmt.Errorf("%w: %s %q is not a valid label value, which the API server's fence marks objects with: %s",
			ErrInvalidOptions, field, lease, strings.Join(errs, "; "))
	}
	return nil
}

// celList is strs as a CEL list literal; strs hold no quote or backslash.
func celList(strs []string) string { return "['" + strings.Join(strs, "', '") + "']" }

// isFenceDenial reports whether err is a refusal of the fence's policy.
func isFenceDenial(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), fenceMessage)
}

// lagRetries are the waits before the fenced client sends a write again that the API
// server's fence refused while the writer's term runs: the API server's view of the
// Lease lags the Lease by a few milliseconds, so the first writes of a new term can be
// judged against the previous holder.
var lagRetries = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}

// sendFenced sends a write by send; a refusal of the API server's fence is sent again
// after each of lagRetries while the term of ref runs. A refused write changed nothing,
// so sending it again is safe.
func sendFenced(ctx context.Context, ref *termRef, send func() error) error {
	err := send()
	for _, wait := range lagRetries {
		if !isFenceDenial(err) || ref.ended() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		err = send()
	}
	return err
}
