package controllerruntime

import (
	"context"
	"fmt"
	"reflect"
	"strings"

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

// ownCache reports whether this controller caches only the shards it leads: asked
// for (CacheOwnShards) and served by the API server. Decided once at Start.
func (s *Sharded) ownCache() bool { return s.ownShards.Load() }

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
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.ShardSelector = sel
			list := s.list.DeepCopyObject().(client.ObjectList)
			err := s.watcher.List(ctx, list, &client.ListOptions{Limit: o.Limit, Continue: o.Continue, Raw: &o})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.ShardSelector = sel
			list := s.list.DeepCopyObject().(client.ObjectList)
			return s.watcher.Watch(ctx, list, &client.ListOptions{Raw: &o})
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, s.spec.For.DeepCopyObject(), 0, toolscache.Indexers{})
	enqueue := func(obj any) {
		if o, ok := obj.(client.Object); ok && s.leads(shard) {
			s.queue.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(client.Object); ok {
				s.mu.Lock()
				if _, led := s.shards[shard]; led {
					s.gone[client.ObjectKeyFromObject(o)] = shard
				}
				s.mu.Unlock()
			}
			enqueue(obj)
		},
	})
	if err != nil {
		s.logger.Error(err, "shard informer", "shard", shard)
		return
	}
	store := inf.GetStore()
	s.mu.Lock()
	s.stores[shard] = store
	s.mu.Unlock()
	inf.RunWithContext(ctx)
	s.mu.Lock()
	if s.stores[shard] == store { // not yet replaced by the shard's next term here
		delete(s.stores, shard)
	}
	s.mu.Unlock()
}

// Reader returns the reader of For's objects that the Reconciler must use when
// CacheOwnShards is set: it reads the informers of the shards led now (an object of a
// shard led elsewhere is not found) when the API server serves sharded watches, and
// the manager's cache otherwise. Get and List (namespace and label selector) only.
func (s *Sharded) Reader() client.Reader { return shardReader{s} }

// CachedObjects returns how many objects of For's type this replica's shard informers
// hold (0 without CacheOwnShards served).
func (s *Sharded) CachedObjects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.stores {
		n += len(st.ListKeys())
	}
	return n
}

// shardReader is Sharded.Reader.
type shardReader struct{ s *Sharded }

// stores returns the stores of the shards led now.
func (r shardReader) stores() []toolscache.Store {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	out := make([]toolscache.Store, 0, len(r.s.stores))
	for _, st := range r.s.stores {
		out = append(out, st)
	}
	return out
}

func (r shardReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if !r.s.ownCache() {
		return r.s.r.mgr.GetCache().Get(ctx, key, obj, opts...)
	}
	if !sameType(obj, r.s.spec.For) {
		return fmt.Errorf("controllerruntime: sharded reader of %T cannot read %T", r.s.spec.For, obj)
	}
	storeKey := key.Name
	if key.Namespace != "" {
		storeKey = key.Namespace + "/" + key.Name
	}
	for _, st := range r.stores() {
		item, ok, err := st.GetByKey(storeKey)
		if err != nil {
			return err
		}
		if ok {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(item.(runtime.Object).DeepCopyObject()).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(r.s.resource(), key.Name)
}

func (r shardReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if !r.s.ownCache() {
		return r.s.r.mgr.GetCache().List(ctx, list, opts...)
	}
	if !sameType(list, r.s.list) {
		return fmt.Errorf("controllerruntime: sharded reader of %T cannot list %T", r.s.list, list)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		return fmt.Errorf("controllerruntime: sharded reader: field selectors are not supported")
	}
	var items []runtime.Object
	for _, st := range r.stores() {
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

func sameType(a, b runtime.Object) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }

// resource returns For's group and resource, for NotFound errors.
func (s *Sharded) resource() schema.GroupResource {
	gvk, err := apiutil.GVKForObject(s.spec.For, s.r.mgr.GetScheme())
	if err != nil {
		return schema.GroupResource{}
	}
	if m, err := s.r.mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}
}
