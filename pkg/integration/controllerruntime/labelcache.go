package controllerruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// ShardLabelDomain ends the prefix of a ring's shard label (ShardLabelKey).
const ShardLabelDomain = "shards.baton.dev"

// ShardLabelKey returns the label that CacheOwnShardsByLabel writes on the objects of
// the ring named ringName: "<ringName>.shards.baton.dev/<shape>", the shape being
// ring.Shape() with "/" as "-" (e.g. "mirror.shards.baton.dev/fnv1a64-uid-ranges-64").
// Its value is the object's shard in decimal. The key names the ring, so two
// controllers' rings over one type never share a label, and the shape, so the labels
// of a ring of another Shards are simply not matched by this ring's selectors.
func ShardLabelKey(ringName string, ring sharding.Ring) string {
	return ringName + "." + ShardLabelDomain + "/" + strings.ReplaceAll(ring.Shape(), "/", "-")
}

// labelResync is how often the informers of unlabelled objects, and the shard
// informers of the kinds cached by label, deliver every object again, so that a label
// patch that failed (on sight, or of a stray) is tried again. A variable only so that
// a test can shorten it.
var labelResync = 30 * time.Second

// cacheKind is a type of objects a sharded controller caches per led shard: For's, or
// (by label) a type of the builder's Owns.
type cacheKind struct {
	typ   reflect.Type // obj's
	obj   client.Object
	list  client.ObjectList
	gvk   schema.GroupVersionKind
	child *shardOwnerHandler // an Owns type: its shard is its controller owner's; nil for For's

	// mu guards unlabelled.
	mu         sync.Mutex
	unlabelled toolscache.Store // the objects without the shard label, while Start runs
}

// newCacheKind returns the cacheKind of obj's type; child is nil for For's.
func (s *Sharded) newCacheKind(obj client.Object, child *shardOwnerHandler) (*cacheKind, error) {
	scheme := s.r.mgr.GetScheme()
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	listObj, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("no list type of %s: %v", gvk, err)
	}
	list, ok := listObj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%T is not a client.ObjectList", listObj)
	}
	return &cacheKind{typ: reflect.TypeOf(obj), obj: obj, list: list, gvk: gvk, child: child}, nil
}

// shardOf returns the shard of obj: its UID's for For's type, its controller owner's
// UID's for an Owns type; ok is false for a child without a controller owner of For's
// type, which no shard caches.
func (k *cacheKind) shardOf(ring sharding.Ring, obj client.Object) (shard int, ok bool) {
	if k.child == nil {
		return ring.ShardOf(string(obj.GetUID())), true
	}
	owners := k.child.owners(obj)
	if len(owners) == 0 {
		return 0, false
	}
	return ring.ShardOf(string(owners[0].UID)), true
}

// checkShardLabel refuses a ring whose shard label would not be a valid label key.
// (sharding.Config's rules, a DNS-1123 subdomain of at most 63 characters, make every
// ring name a valid prefix today; the check keeps the error clear should they change.)
func checkShardLabel(ringName string, ring sharding.Ring) error {
	key := ShardLabelKey(ringName, ring)
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("Sharding.Name %q: the shard label %q of CacheOwnShardsByLabel is not a valid label key: %s",
			ringName, key, strings.Join(errs, "; "))
	}
	return nil
}

// addOwnsByLabel caches the objects of an Owns type per led shard, by the shard label
// (each carries its controller owner's shard): their events enqueue the owner
// through h. Called before the manager starts.
func (s *Sharded) addOwnsByLabel(obj client.Object, h *shardOwnerHandler) error {
	k, err := s.newCacheKind(obj, h)
	if err != nil {
		return fmt.Errorf("%w: sharded controller %q: Owns %T: %w", ErrInvalidRegistration, s.spec.Name, obj, err)
	}
	s.mu.Lock()
	s.stores[k.typ] = map[int]toolscache.Store{}
	s.mu.Unlock()
	s.childKinds = append(s.childKinds, k)
	return nil
}

// labelledKinds returns the kinds cached by the shard label: For's unless the API
// server serves its sharded watch (CacheOwnShards), and the Owns types.
func (s *Sharded) labelledKinds() []*cacheKind {
	var out []*cacheKind
	if s.labelFor.Load() {
		out = append(out, s.forKind)
	}
	return append(out, s.childKinds...)
}

// kindOf returns the kind of objects of type t cached per shard now, nil when t's
// objects are read from the manager's cache.
func (s *Sharded) kindOf(t reflect.Type) *cacheKind {
	if t == nil {
		return nil
	}
	if t == s.forKind.typ {
		if s.ownCache() {
			return s.forKind
		}
		return nil
	}
	for _, k := range s.childKinds {
		if k.typ == t {
			return k
		}
	}
	return nil
}

// itemType returns the type of the items of list when it lists a kind cached per
// shard, nil otherwise.
func (s *Sharded) itemType(list client.ObjectList) reflect.Type {
	t := reflect.TypeOf(list)
	for _, k := range append([]*cacheKind{s.forKind}, s.childKinds...) {
		if reflect.TypeOf(k.list) == t {
			return k.typ
		}
	}
	return nil
}

// labelled reports whether k's shard informers select the shard label (else the API
// server's shard selector).
func (s *Sharded) labelled(k *cacheKind) bool { return k.child != nil || s.labelFor.Load() }

// runShardLabelCache runs the informer of k's objects labelled with shard until ctx,
// the shard's term context, ends (runShardStore).
func (s *Sharded) runShardLabelCache(ctx context.Context, shard int, k *cacheKind) {
	sel := s.selector(k, s.labelKey+"="+strconv.Itoa(shard))
	s.runShardStore(ctx, shard, k, func(o *metav1.ListOptions) { o.LabelSelector = sel })
}

// selector returns the label selector of an informer of k's objects: req, and
// ForSelector's requirements for For's type.
func (s *Sharded) selector(k *cacheKind, req string) string {
	if k != s.forKind || s.spec.ForSelector == nil || s.spec.ForSelector.Empty() {
		return req
	}
	if req == "" {
		return s.spec.ForSelector.String()
	}
	return req + "," + s.spec.ForSelector.String()
}

// runLabellers runs, until ctx ends, one informer per labelled kind of the objects
// without this ring shape's label (metadata only), on every replica: each labels the
// objects of the shards this replica leads, on sight. It returns the function that
// waits for them.
func (s *Sharded) runLabellers(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for _, k := range s.labelledKinds() {
		wg.Go(func() { s.runLabeller(ctx, k) })
	}
	return wg.Wait
}

// runLabeller runs k's informer of unlabelled objects until ctx ends.
func (s *Sharded) runLabeller(ctx context.Context, k *cacheKind) {
	sel := s.selector(k, "!"+s.labelKey)
	listKind := k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List")
	newList := func() *metav1.PartialObjectMetadataList {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(listKind)
		return l
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			list := newList()
			err := s.watcher.List(ctx, list, &client.ListOptions{Limit: o.Limit, Continue: o.Continue, Raw: &o})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return s.watcher.Watch(ctx, newList(), &client.ListOptions{Raw: &o})
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, labelResync, toolscache.Indexers{})
	_ = inf.SetTransform(func(o any) (any, error) {
		if m, ok := o.(client.Object); ok {
			m.SetManagedFields(nil)
		}
		return o, nil
	})
	label := func(obj any) {
		if o, ok := obj.(client.Object); ok {
			if shard, ok := k.shardOf(s.ring, o); ok && s.leads(shard) {
				s.patchLabel(ctx, k, o, shard)
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: label, UpdateFunc: func(_, obj any) { label(obj) },
	}); err != nil {
		s.logger.Error(err, "informer of unlabelled objects", "kind", k.gvk.Kind)
		return
	}
	k.mu.Lock()
	k.unlabelled = inf.GetStore()
	k.mu.Unlock()
	inf.RunWithContext(ctx)
	k.mu.Lock()
	k.unlabelled = nil
	k.mu.Unlock()
}

// labelBacklog labels the objects of shard, just acquired, that the informers of
// unlabelled objects hold: those created while the shard had no owner, or before the
// replica leading it saw them.
func (s *Sharded) labelBacklog(ctx context.Context, shard int) {
	for _, k := range s.labelledKinds() {
		k.mu.Lock()
		st := k.unlabelled
		k.mu.Unlock()
		if st == nil {
			continue
		}
		for _, item := range st.List() {
			if ctx.Err() != nil {
				return
			}
			if o, ok := item.(client.Object); ok {
				if sh, ok := k.shardOf(s.ring, o); ok && sh == shard {
					s.patchLabel(ctx, k, o, shard)
				}
			}
		}
	}
}

// relabelStray labels obj, seen by the informer of shard of k, with its own shard when
// that is another (a label written by hand), and reports whether it did.
func (s *Sharded) relabelStray(ctx context.Context, o client.Object, k *cacheKind, shard int) bool {
	own, ok := k.shardOf(s.ring, o)
	if !ok || own == shard {
		return false
	}
	s.patchLabel(ctx, k, o, own)
	return true
}

// patchLabel writes shard as obj's shard label, and removes the labels of the ring's
// other shapes, by a merge patch of metadata.labels alone, on the condition that the
// object is still the one of obj's UID. The value depends only on the ring's shape and
// a UID, so every replica would write the same: the patch is not fenced (a replica
// whose shard term ended writes what the next owner would). It writes nothing when the
// labels are already so. A failure is logged and tried again at the next resync.
func (s *Sharded) patchLabel(ctx context.Context, k *cacheKind, obj client.Object, shard int) {
	want := strconv.Itoa(shard)
	labels := map[string]any{}
	if v, ok := obj.GetLabels()[s.labelKey]; !ok || v != want {
		labels[s.labelKey] = want
	}
	prefix := s.config.Name + "." + ShardLabelDomain + "/"
	for key := range obj.GetLabels() {
		if key != s.labelKey && strings.HasPrefix(key, prefix) {
			labels[key] = nil
		}
	}
	if len(labels) == 0 {
		return
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": obj.GetUID(), "labels": labels}})
	if err != nil {
		s.logger.Error(err, "shard label patch")
		return
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(k.gvk)
	target.SetNamespace(obj.GetNamespace())
	target.SetName(obj.GetName())
	err = s.watcher.Patch(ctx, target, client.RawPatch(types.MergePatchType, body))
	switch {
	case err == nil:
		s.labelWrites.Add(1)
	case apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) || ctx.Err() != nil:
		// Gone, or replaced by an object of another UID (the API server refuses a
		// patch changing the UID as invalid; the new object's own event labels it).
	default:
		s.logger.Error(err, "writing the shard label; tried again at the next resync", "kind", k.gvk.Kind,
			"object", client.ObjectKeyFromObject(obj), "shard", shard)
	}
}

// Unlabelled returns how many objects the informers of objects without the shard
// label hold on this replica (metadata only): objects not yet labelled, and Owns
// objects without a controller owner of For's type, which no shard caches.
func (s *Sharded) Unlabelled() int {
	n := 0
	for _, k := range s.labelledKinds() {
		k.mu.Lock()
		st := k.unlabelled
		k.mu.Unlock()
		if st != nil {
			n += len(st.ListKeys())
		}
	}
	return n
}
