package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/baton-dev/baton/pkg/fence"
	"github.com/baton-dev/baton/pkg/termctx"
)

// TermAnnotation is the annotation a fenced client stamps on every object it creates,
// updates or patches: the decimal term of the writer (pkg/fence's, the one every
// writer of Baton stamps).
const TermAnnotation = fence.TermAnnotation

// NewFencedClient wraps c so that its writes are fenced by the term of their context
// (see docs/design/controllerruntime.md, # Fencing). Reads go to c unchanged; the fence's own reads
// (Delete by name, patches of an object without a resourceVersion, DeleteAllOf) go to
// c too. Runtime.FencedClient is the same with the refusals counted in the Runtime's
// metrics, fresh reads, the check of the Lease before refusing a stamp of no term, and
// the Lease stamps of the API server's fence.
func NewFencedClient(c client.Client) client.Client {
	return &fencedClient{Client: c, reader: c, logger: slog.Default()}
}

// FencedClient wraps c (nil: the manager's client) in a fenced client whose refusals are
// counted in baton_fenced_writes_refused_total. Its fence reads the objects it checks
// with the manager's API reader (not the cache), and reads the Lease before it refuses
// a write over a newer stamp (see docs/design/controllerruntime.md, # Fencing).
func (r *Runtime) FencedClient(c client.Client) client.Client {
	if c == nil {
		c = r.mgr.GetClient()
	}
	return &fencedClient{Client: c, reader: r.mgr.GetAPIReader(), refused: &r.metrics.refused,
		leases: r.leaseOf, logger: r.slogger}
}

// fencedClient is a client.Client whose writes are fenced.
type fencedClient struct {
	client.Client
	reader  client.Reader  // the fence's reads
	refused *atomic.Uint64 // nil: not counted
	// leases gives the reader of a term's Lease (termctx.Term.Lease), which the fence
	// reads before it refuses a newer stamp, and whose token it stamps where the API
	// server's fence is bound to that Lease; nil (NewFencedClient): none is read.
	leases func(termctx.Term) *leaseReader
	logger *slog.Logger
}

// refuse counts err, a refusal of the fence, and returns it.
func (f *fencedClient) refuse(err error) error {
	if f.refused != nil {
		f.refused.Add(1)
	}
	return err
}

// stamps are the annotations a write of one term carries, and with the API server's
// fence the label that marks the object for it: fence.Stamps, with the methods this
// package's objects need.
type stamps fence.Stamps

func (s stamps) split() (annotations, labels map[string]string) { return fence.Stamps(s).Split() }

// tokened reports whether s carries a Lease token, for the API server's fence.
func (s stamps) tokened() bool { return fence.Stamps(s).Tokened() }

// stamp sets the stamps on obj's annotations and labels.
func (s stamps) stamp(obj client.Object) {
	annotations, labels := s.split()
	obj.SetAnnotations(merged(obj.GetAnnotations(), annotations))
	if labels != nil {
		obj.SetLabels(merged(obj.GetLabels(), labels))
	}
}

// merged returns m (a new map if nil) with every entry of add set.
func merged(m, add map[string]string) map[string]string {
	if m == nil {
		m = make(map[string]string, len(add))
	}
	for k, v := range add {
		m[k] = v
	}
	return m
}

func (s stamps) carried(obj client.Object) bool {
	return fence.Stamps(s).Carried(obj.GetAnnotations(), obj.GetLabels())
}

// begin refuses a write under ctx outside a running term and returns the stamps of the
// write: the term, and with the API server's fence the Lease token of the term.
func (f *fencedClient) begin(ctx context.Context) (*termRef, stamps, error) {
	ref, err := termOf(ctx)
	if err != nil {
		return nil, nil, f.refuse(err)
	}
	if f.leases != nil {
		ref.lease = f.leases(ref.t)
	}
	s := stamps(fence.ForTerm(ref.term))
	if l := ref.lease; l != nil && l.admission {
		tok, err := l.token(ctx, ref)
		if err != nil {
			if errors.Is(err, ErrTermEnded) {
				return nil, nil, f.refuse(err)
			}
			return nil, nil, err
		}
		l.stamp(s, tok)
	}
	return ref, s, nil
}

// admit refuses a write of ref's term over base, the object as read, when base is
// stamped with a newer term. Before it refuses it reads the Lease once (when it knows
// it): if this replica still holds it in ref's term, no term of this Lease wrote that
// stamp (a later term needs a later acquisition), so the write goes ahead, under the
// resourceVersion precondition every fenced write carries, and a WARN names the object.
func (f *fencedClient) admit(ctx context.Context, ref *termRef, base client.Object) error {
	stamped, _, err := fence.Stamped(base.GetAnnotations())
	if err != nil || stamped <= ref.term {
		return nil // unparsable: not ours to judge; the resourceVersion precondition holds
	}
	var holds fence.HoldsLease
	if l := ref.lease; l != nil {
		holds = func(ctx context.Context) (bool, error) {
			_, held, err := l.holds(ctx, ref)
			return held, err
		}
	}
	replaced, err := fence.Judge(ctx, describe(base), stamped, ref.term, holds)
	if replaced != 0 {
		l := ref.lease
		f.logger.Warn("overwriting a term stamp of no term of this Lease: this replica holds the Lease in its term, "+
			"which is older than the stamp (an object restored from another cluster, or written by another program)",
			"object", describe(base), "stamp", replaced, "term", ref.term, "lease", l.namespace+"/"+l.name)
	}
	if errors.Is(err, fence.ErrStaleTerm) {
		return f.refuse(err)
	}
	return err
}

func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// beginOver begins a write over obj as it is (begin), refusing it when obj is
// stamped with a newer term (admit) or, with versioned, has no resourceVersion.
func (f *fencedClient) beginOver(ctx context.Context, obj client.Object, versioned bool) (*termRef, stamps, error) {
	ref, s, err := f.begin(ctx)
	switch {
	case err != nil:
	case versioned && obj.GetResourceVersion() == "":
		err = f.refuse(fmt.Errorf("%w: %s", ErrNoResourceVersion, describe(obj)))
	default:
		err = f.admit(ctx, ref, obj)
	}
	return ref, s, err
}

// checked returns the object a write of ref's term over obj is checked against, obj
// itself or, without a resourceVersion, a fresh read of it, once admit let it pass.
func (f *fencedClient) checked(ctx context.Context, ref *termRef, obj client.Object) (client.Object, error) {
	base := obj
	if obj.GetResourceVersion() == "" {
		var err error
		if base, err = f.read(ctx, obj); err != nil {
			return nil, err
		}
	}
	return base, f.admit(ctx, ref, base)
}

// read returns obj as the API server has it now (a fresh read through the fence's
// reader), into a copy of obj.
func (f *fencedClient) read(ctx context.Context, obj client.Object) (client.Object, error) {
	cur := obj.DeepCopyObject().(client.Object)
	if err := f.reader.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return nil, err
	}
	return cur, nil
}

// send sends a write of ref's term (sendFenced) and counts a refusal of the API
// server's fence.
func (f *fencedClient) send(ctx context.Context, ref *termRef, write func() error) error {
	err := sendFenced(ctx, ref, write)
	if isFenceDenial(err) {
		return f.refuse(err)
	}
	return err
}

// Create stamps obj with the writer's term and creates it. A stale Create in flight
// is refused only by the API server's fence (NewAdmissionFence).
func (f *fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	ref, s, err := f.begin(ctx)
	if err != nil {
		return err
	}
	s.stamp(obj)
	return f.send(ctx, ref, func() error { return f.Client.Create(ctx, obj, opts...) })
}

// Update refuses obj without a resourceVersion or stamped with a newer term, stamps it
// with the writer's term and updates it under its resourceVersion (a compare-and-swap).
func (f *fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	ref, s, err := f.beginOver(ctx, obj, true)
	if err != nil {
		return err
	}
	s.stamp(obj)
	return f.send(ctx, ref, func() error { return f.Client.Update(ctx, obj, opts...) })
}

// Patch is a compare-and-swap on the version obj was read at: it refuses obj stamped
// with a newer term, and sends patch with the writer's stamps and that resourceVersion
// added to its body, whatever its type (merge, strategic merge, JSON, or a raw body of
// these). obj without a resourceVersion is read first (the version patched is the one
// read). Server-side apply patches (client.Apply) are stamped but carry no version: an
// apply may create the object.
func (f *fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	ref, s, err := f.begin(ctx)
	if err != nil {
		return err
	}
	base, version := client.Object(obj), ""
	if !isApply(patch.Type()) {
		if base, err = f.checked(ctx, ref, obj); err != nil {
			return err
		}
		version = base.GetResourceVersion()
	}
	sp := &stampedPatch{inner: patch, stamps: s, version: version}
	sp.had(base) // before obj, maybe base, is stamped
	s.stamp(obj)
	return f.send(ctx, ref, func() error { return f.Client.Patch(ctx, obj, sp, opts...) })
}

// Apply stamps the apply configuration with the writer's stamps and applies it. It is
// fenced by the term and, against a stale apply in flight, by the API server's fence;
// it carries no resourceVersion (an apply may create the object).
func (f *fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	ref, s, err := f.begin(ctx)
	if err != nil {
		return err
	}
	u, err := stampApplyConfiguration(obj, s)
	if err != nil {
		return err
	}
	return f.send(ctx, ref, func() error { return f.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...) })
}

// Delete reads obj when it has no resourceVersion (a delete by name), refuses it when
// it is stamped with a newer term, and deletes it under the preconditions of the version
// checked: its UID and resourceVersion. With the API server's fence it stamps the
// object first (a compare-and-swap on that version), so that the fence can check the
// delete (a DELETE carries no object, only the one deleted), and deletes the version
// it stamped.
func (f *fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	ref, s, err := f.begin(ctx)
	if err != nil {
		return err
	}
	return f.deleteChecked(ctx, ref, s, obj, opts)
}

func (f *fencedClient) deleteChecked(ctx context.Context, ref *termRef, s stamps, obj client.Object, opts []client.DeleteOption) error {
	base, err := f.checked(ctx, ref, obj)
	if err != nil {
		return err
	}
	if s.tokened() && !s.carried(base) {
		stamped := base.DeepCopyObject().(client.Object)
		sp := &stampedPatch{inner: client.RawPatch(mergePatch, []byte("{}")), stamps: s, version: base.GetResourceVersion()}
		sp.had(base)
		if err := f.send(ctx, ref, func() error { return f.Client.Patch(ctx, stamped, sp) }); err != nil {
			return err
		}
		base = stamped
	}
	pre := metav1.Preconditions{}
	if uid := base.GetUID(); uid != "" {
		pre.UID = &uid
	}
	if rv := base.GetResourceVersion(); rv != "" {
		pre.ResourceVersion = &rv
	}
	opts = append(opts[:len(opts):len(opts)], client.Preconditions(pre))
	return f.send(ctx, ref, func() error { return f.Client.Delete(ctx, obj, opts...) })
}

// DeleteAllOf lists the objects the options select (metadata only, through the fence's
// reader) and deletes each as Delete does, so that each is checked; it is no longer one
// request. Objects gone meanwhile are skipped; it returns every other error, joined,
// after trying every object.
func (f *fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	ref, s, err := f.begin(ctx)
	if err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, f.Scheme())
	if err != nil {
		return err
	}
	o := (&client.DeleteAllOfOptions{}).ApplyOptions(opts)
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := f.reader.List(ctx, list, &o.ListOptions); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		item := &list.Items[i]
		item.SetGroupVersionKind(gvk)
		err := f.deleteChecked(ctx, ref, s, item, []client.DeleteOption{&o.DeleteOptions})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			if _, ended := termOf(ctx); ended != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
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

// fencedSubResource fences the writes of a subresource. A subresource ignores
// metadata, so the stamp is compared but not written (and the API server's fence does
// not cover subresources); Update and Patch are still compare-and-swaps on the version
// the object was checked at, as the main resource's are.
type fencedSubResource struct {
	f *fencedClient
	w client.SubResourceWriter
}

func (s *fencedSubResource) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if _, _, err := s.f.beginOver(ctx, obj, false); err != nil {
		return err
	}
	return s.w.Create(ctx, obj, sub, opts...)
}

func (s *fencedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if _, _, err := s.f.beginOver(ctx, obj, true); err != nil {
		return err
	}
	return s.w.Update(ctx, obj, opts...)
}

// Patch refuses obj stamped with a newer term and sends patch with the
// resourceVersion obj was read at added to its body (obj without one is read first), so
// that a patch of an ended term delivered late conflicts with any write since, as
// fencedClient.Patch does. An apply patch carries no version (an apply may create).
func (s *fencedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	ref, _, err := s.f.begin(ctx)
	if err != nil {
		return err
	}
	if isApply(patch.Type()) {
		if err := s.f.admit(ctx, ref, obj); err != nil {
			return err
		}
		return s.w.Patch(ctx, obj, patch, opts...)
	}
	base, err := s.f.checked(ctx, ref, obj)
	if err != nil {
		return err
	}
	sp := &stampedPatch{inner: patch, version: base.GetResourceVersion()}
	return s.w.Patch(ctx, obj, sp, opts...)
}

func (s *fencedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if _, _, err := s.f.begin(ctx); err != nil {
		return err
	}
	return s.w.Apply(ctx, obj, opts...)
}
