package controllerruntime

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// shardOwnerHandler is the event handler of a sharded controller's Owns: it enqueues
// the owner of the object, of the controller's For kind, when this replica leads the
// owner's shard. The owner's UID is in the ownerReference, so its shard is known
// without reading the owner.
type shardOwnerHandler struct {
	s     *Sharded
	owner schema.GroupKind // For's
	every bool             // every owner of that kind, not only the controller owner
}

func (h *shardOwnerHandler) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(q, e.Object)
}

func (h *shardOwnerHandler) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(q, e.ObjectOld, e.ObjectNew)
}

func (h *shardOwnerHandler) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(q, e.Object)
}

func (h *shardOwnerHandler) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(q, e.Object)
}

// enqueue adds a request for each owner of objs in a shard led here, once.
func (h *shardOwnerHandler) enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
	seen := map[reconcile.Request]bool{}
	for _, obj := range objs {
		for _, ref := range h.owners(obj) {
			if !h.s.leads(h.s.ring.ShardOf(string(ref.UID))) {
				continue
			}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Name: ref.Name}}
			if h.namespaced(ref) {
				req.Namespace = obj.GetNamespace()
			}
			if seen[req] {
				continue
			}
			seen[req] = true
			// The owner may not be in the cache yet (created just before its child):
			// its shard is known here, from the UID, and read at the reconcile.
			h.s.mu.Lock()
			h.s.gone[req.NamespacedName] = h.s.ring.ShardOf(string(ref.UID))
			h.s.mu.Unlock()
			q.Add(req)
		}
	}
}

// owners returns the owner references of obj of the For kind: the controller's only,
// or every one.
func (h *shardOwnerHandler) owners(obj client.Object) []metav1.OwnerReference {
	if obj == nil {
		return nil
	}
	refs := obj.GetOwnerReferences()
	if !h.every {
		refs = nil
		if c := metav1.GetControllerOf(obj); c != nil {
			refs = append(refs, *c)
		}
	}
	var out []metav1.OwnerReference
	for _, ref := range refs {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == h.owner.Group && ref.Kind == h.owner.Kind {
			out = append(out, ref)
		}
	}
	return out
}

// namespaced reports whether the owner's kind is namespaced (an owner in the
// object's namespace); true when the mapper cannot tell.
func (h *shardOwnerHandler) namespaced(ref metav1.OwnerReference) bool {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	m, err := h.s.r.mgr.GetRESTMapper().RESTMapping(h.owner, gv.Version)
	if err != nil {
		h.s.logger.Error(err, "owner kind unknown to the REST mapper; enqueued in the object's namespace", "kind", h.owner.String())
		return true
	}
	return m.Scope.Name() != meta.RESTScopeNameRoot
}
