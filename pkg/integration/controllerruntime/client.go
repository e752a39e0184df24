package controllerruntime

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TermAnnotation is the annotation a fenced client stamps on every object it creates,
// updates or patches: the decimal term of the writer.
const TermAnnotation = "baton.dev/term"

// NewFencedClient wraps c so that its writes are fenced by the term of their context
// (see the package doc, # Fencing). Reads go to c unchanged. Runtime.FencedClient is the
// same with the refusals counted in the Runtime's metrics.
func NewFencedClient(c client.Client) client.Client { return &fencedClient{Client: c} }

// FencedClient wraps c (nil: the manager's client) in a fenced client whose refusals are
// counted in baton_fenced_writes_refused_total.
func (r *Runtime) FencedClient(c client.Client) client.Client {
	if c == nil {
		c = r.mgr.GetClient()
	}
	return &fencedClient{Client: c, refused: &r.metrics.refused}
}

// fencedClient is a client.Client whose writes are fenced.
type fencedClient struct {
	client.Client
	refused *atomic.Uint64 // nil: not counted
}

// check refuses a write under ctx to obj (nil: no object to compare) when the term of
// ctx ended or obj is stamped with a newer term; it returns the writer's term.
func (f *fencedClient) check(ctx context.Context, obj client.Object) (uint64, error) {
	term, err := termOf(ctx)
	if err == nil && obj != nil {
		err = stampedNewer(obj, term)
	}
	if err != nil && f.refused != nil {
		f.refused.Add(1)
	}
	return term, err
}

// stampedNewer returns ErrStaleTerm when obj carries a term above term.
func stampedNewer(obj client.Object, term uint64) error {
	v, ok := obj.GetAnnotations()[TermAnnotation]
	if !ok {
		return nil
	}
	stamped, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil // not ours to judge; the resourceVersion precondition still holds
	}
	if stamped > term {
		return fmt.Errorf("%w: %s %s/%s carries term %d, the writer's term is %d",
			ErrStaleTerm, kindOf(obj), obj.GetNamespace(), obj.GetName(), stamped, term)
	}
	return nil
}

func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}

// stamp sets TermAnnotation on obj.
func stamp(obj client.Object, term uint64) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[TermAnnotation] = strconv.FormatUint(term, 10)
	obj.SetAnnotations(a)
}

// needVersion refuses an update of obj without a resourceVersion.
func needVersion(obj client.Object) error {
	if obj.GetResourceVersion() == "" {
		return fmt.Errorf("%w: %s %s/%s", ErrNoResourceVersion, kindOf(obj), obj.GetNamespace(), obj.GetName())
	}
	return nil
}

// Create stamps obj with the writer's term and creates it.
func (f *fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	term, err := f.check(ctx, nil)
	if err != nil {
		return err
	}
	stamp(obj, term)
	return f.Client.Create(ctx, obj, opts...)
}

// Update refuses obj stamped with a newer term or without a resourceVersion, stamps it
// with the writer's term and updates it under its resourceVersion (a compare-and-swap).
func (f *fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	term, err := f.check(ctx, obj)
	if err != nil {
		return err
	}
	if err := needVersion(obj); err != nil {
		return err
	}
	stamp(obj, term)
	return f.Client.Update(ctx, obj, opts...)
}

// Patch refuses obj stamped with a newer term and stamps it with the writer's term, so a
// patch computed from obj (client.MergeFrom) carries the stamp. It is a compare-and-swap
// only when the patch carries the resourceVersion
// (client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})).
func (f *fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	term, err := f.check(ctx, obj)
	if err != nil {
		return err
	}
	stamp(obj, term)
	return f.Client.Patch(ctx, obj, patch, opts...)
}

// Apply is fenced by the term only (no stamp, no precondition).
func (f *fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if _, err := f.check(ctx, nil); err != nil {
		return err
	}
	return f.Client.Apply(ctx, obj, opts...)
}

// Delete refuses obj stamped with a newer term, and deletes it under a resourceVersion
// precondition when obj has one.
func (f *fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, err := f.check(ctx, obj); err != nil {
		return err
	}
	if rv := obj.GetResourceVersion(); rv != "" {
		opts = append(opts, client.Preconditions{ResourceVersion: &rv})
	}
	return f.Client.Delete(ctx, obj, opts...)
}

// DeleteAllOf is fenced by the term only.
func (f *fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if _, err := f.check(ctx, nil); err != nil {
		return err
	}
	return f.Client.DeleteAllOf(ctx, obj, opts...)
}

// Status returns the fenced writer of the status subresource.
func (f *fencedClient) Status() client.SubResourceWriter {
	return &fencedSubResource{f: f, w: f.Client.Status()}
}

// SubResource returns a client of the subresource whose writes are fenced.
func (f *fencedClient) SubResource(name string) client.SubResourceClient {
	sc := f.Client.SubResource(name)
	return struct {
		client.SubResourceReader
		client.SubResourceWriter
	}{sc, &fencedSubResource{f: f, w: sc}}
}

// fencedSubResource fences the writes of a subresource. The status subresource ignores
// metadata, so the stamp is compared but not written; Update is still a compare-and-swap.
type fencedSubResource struct {
	f *fencedClient
	w client.SubResourceWriter
}

func (s *fencedSubResource) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if _, err := s.f.check(ctx, obj); err != nil {
		return err
	}
	return s.w.Create(ctx, obj, sub, opts...)
}

func (s *fencedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if _, err := s.f.check(ctx, obj); err != nil {
		return err
	}
	if err := needVersion(obj); err != nil {
		return err
	}
	return s.w.Update(ctx, obj, opts...)
}

func (s *fencedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, err := s.f.check(ctx, obj); err != nil {
		return err
	}
	return s.w.Patch(ctx, obj, patch, opts...)
}

func (s *fencedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if _, err := s.f.check(ctx, nil); err != nil {
		return err
	}
	return s.w.Apply(ctx, obj, opts...)
}
