package controllerruntime

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ownCache reports whether this controller caches For's objects of the shards it
// leads only: by the API server's shard selector (CacheOwnShards, served) or by the
// shard label (CacheOwnShardsByLabel). Decided once at Start.
func (s *Sharded) ownCache() bool { return s.ownShards.Load() || s.labelFor.Load() }

// runShardCache runs an informer of For's objects of shard alone (the API server
// filters them by the shard's selector) until ctx, the shard's term context, ends. Its
// events enqueue requests, its first list enqueues every object of the shard (the
// baton), and its store serves Reader while the shard is led here.
func (s *Sharded) runShardCache(ctx context.Context, shard int) {
	sel, err := s.ring.Selector([]int{shard})
	if err != nil {
		s.logger.Error(err, "shard selector", "shard", shard)
		return
	}
	labelSel := s.selector(s.forKind, "")
	s.runShardStore(ctx, shard, s.forKind, func(o *metav1.ListOptions) { o.ShardSelector, o.LabelSelector = sel, labelSel })
}

// runShardStore runs an informer of k's objects of shard, its list and watch options
// set by selectShard (the API server's shard selector, or the shard label's), until
// ctx, the shard's term context, ends. Its events enqueue requests (the object, or a
// child's owner), its first list enqueues every object of the shard, and its store
// serves Reader while the shard is led here.
func (s *Sharded) runShardStore(ctx context.Context, shard int, k *cacheKind, selectShard func(*metav1.ListOptions)) {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			selectShard(&o)
			list := k.list.DeepCopyObject().(client.ObjectList)
			err := s.watcher.List(ctx, list, &client.ListOptions{Limit: o.Limit, Continue: o.Continue, Raw: &o})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			selectShard(&o)
			list := k.list.DeepCopyObject().(client.ObjectList)
			return s.watcher.Watch(ctx, list, &client.ListOptions{Raw: &o})
		},
	}
	resync := time.Duration(0)
	if s.labelled(k) {
		resync = labelResync // a stray whose relabel failed is tried again
	}
	inf := toolscache.NewSharedIndexInformer(lw, k.obj.DeepCopyObject(), resync, toolscache.Indexers{})
	if _, err := inf.AddEventHandler(s.shardStoreHandler(ctx, shard, k)); err != nil {
		s.logger.Error(err, "shard informer", "shard", shard)
		return
	}
	store := inf.GetStore()
	s.mu.Lock()
	s.stores[k.typ][shard] = store
	s.mu.Unlock()
	inf.RunWithContext(ctx)
	s.mu.Lock()
	if s.stores[k.typ][shard] == store { // not yet replaced by the shard's next term here
		delete(s.stores[k.typ], shard)
	}
	s.mu.Unlock()
}

// shardStoreHandler enqueues the requests of the events of a shard informer of k: For's
// objects themselves (a deleted one's shard recorded), a child's controller owner.
// An object labelled with another shard than its own (written by hand) is relabelled
// and not enqueued here.
func (s *Sharded) shardStoreHandler(ctx context.Context, shard int, k *cacheKind) toolscache.ResourceEventHandler {
	enqueue := func(obj any, deleted bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(client.Object)
		if !ok || !s.leads(shard) {
			return
		}
		if s.labelled(k) && !deleted && s.relabelStray(ctx, o, k, shard) {
			return
		}
		if k.child != nil {
			k.child.enqueue(s.queue, o)
			return
		}
		key := client.ObjectKeyFromObject(o)
		if deleted {
			own := s.ring.ShardOf(string(o.GetUID())) // shard, but for a stray label
			s.mu.Lock()
			if _, led := s.shards[own]; led {
				s.gone[key] = own
			}
			s.mu.Unlock()
		}
		s.queue.Add(reconcile.Request{NamespacedName: key})
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { enqueue(obj, false) },
		UpdateFunc: func(old, obj any) {
			o, ok := obj.(client.Object)
			if prev, isObj := old.(client.Object); ok && isObj && prev.GetResourceVersion() == o.GetResourceVersion() {
				// A resync: only a stray whose relabel failed is written again.
				if s.leads(shard) {
					s.relabelStray(ctx, o, k, shard)
				}
				return
			}
			enqueue(obj, false)
		},
		DeleteFunc: func(obj any) { enqueue(obj, true) },
	}
}

// Reader returns the reader that the Reconciler must use with CacheOwnShards or
// CacheOwnShardsByLabel: the objects of For's type and (by label) of the builder's
// Owns types are read from the informers of the shards led now (an object of a shard
// led elsewhere, or not yet labelled, is not found), those of other types from the
// manager's cache. Without a per-shard cache of For's type (CacheOwnShards where the
// API server does not serve sharded watches, or neither option) it reads the
// manager's cache. Get and List (namespace and label selector) only.
func (s *Sharded) Reader() client.Reader { return shardReader{s} }

// CachedObjects returns how many objects of For's type this replica's shard informers
// hold (0 when For's objects are in the manager's cache).
func (s *Sharded) CachedObjects() int { return s.Cached(s.spec.For) }

// Cached returns how many objects of obj's type this replica's shard informers hold:
// For's type, or an Owns type cached by label (0 for others).
func (s *Sharded) Cached(obj client.Object) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.stores[reflect.TypeOf(obj)] {
		n += len(st.ListKeys())
	}
	return n
}

// shardReader is Sharded.Reader.
type shardReader struct{ s *Sharded }

// stores returns the stores of t's objects of the shards led now, and whether t's
// objects are cached by shard (read from the manager's cache otherwise).
func (r shardReader) stores(t reflect.Type) ([]toolscache.Store, bool) {
	k := r.s.kindOf(t)
	if k == nil {
		return nil, false
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	out := make([]toolscache.Store, 0, len(r.s.stores[t]))
	for _, st := range r.s.stores[t] {
		out = append(out, st)
	}
	return out, true
}

func (r shardReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	stores, sharded := r.stores(reflect.TypeOf(obj))
	if !sharded {
		return r.s.r.mgr.GetCache().Get(ctx, key, obj, opts...)
	}
	storeKey := key.Name
	if key.Namespace != "" {
		storeKey = key.Namespace + "/" + key.Name
	}
	for _, st := range stores {
		item, ok, err := st.GetByKey(storeKey)
		if err != nil {
			return err
		}
		if ok {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(item.(runtime.Object).DeepCopyObject()).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(r.s.resource(obj), key.Name)
}

func (r shardReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	stores, sharded := r.stores(r.s.itemType(list))
	if !sharded {
		return r.s.r.mgr.GetCache().List(ctx, list, opts...)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		return fmt.Errorf("controllerruntime: sharded reader: field selectors are not supported")
	}
	var items []runtime.Object
	for _, st := range stores {
		for _, item := range st.List() {
			obj := item.(client.Object)
			if o.Namespace != "" && obj.GetNamespace() != o.Namespace {
				continue
			}
			if o.LabelSelector != nil && !o.LabelSelector.Matches(labelSet(obj.GetLabels())) {
				continue
			}
			items = append(items, obj.DeepCopyObject())
		}
	}
	return meta.SetList(list, items)
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// resource returns obj's group and resource, for NotFound errors.
func (s *Sharded) resource(obj client.Object) schema.GroupResource {
	gvk, err := apiutil.GVKForObject(obj, s.r.mgr.GetScheme())
	if err != nil {
		return schema.GroupResource{}
	}
	if m, err := s.r.mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}
}
