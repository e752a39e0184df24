package controllerruntime

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ServerSharding tells whether the API server serves sharded list and watch
// (Kubernetes' ShardedListAndWatch feature, KEP-5866) for a type.
type ServerSharding int

const (
	// ShardingUnknown: the check failed (see the log) or did not run yet.
	ShardingUnknown ServerSharding = iota
	// ShardingServed: a list with a shard selector came back with ListMeta.ShardInfo.
	ShardingServed
	// ShardingNotServed: the API server ignored the selector (ShardInfo nil), as it
	// does without the feature gate.
	ShardingNotServed
)

func (s ServerSharding) String() string {
	switch s {
	case ShardingServed:
		return "served"
	case ShardingNotServed:
		return "not served"
	default:
		return "unknown"
	}
}

// ServerSharding returns what the check at Start found.
func (s *Sharded) ServerSharding() ServerSharding { return ServerSharding(s.serverSharding.Load()) }

// reportServerSharding asks the API server once whether it serves sharded lists of
// For's type (a list of one object with the selector of shard 0) and says in the
// log what the controller does about it: with CacheOwnShards and the server serving
// it, one informer per led shard (shardinformer.go); otherwise the manager's cache of
// every object, filtered on the client by the UID's shard.
func (s *Sharded) reportServerSharding(ctx context.Context) {
	sel, err := s.ring.Selector([]int{0})
	if err != nil {
		s.logger.Error(err, "shard selector")
		return
	}
	gvk, err := apiutil.GVKForObject(s.spec.For, s.r.mgr.GetScheme())
	if err != nil {
		s.logger.Error(err, "checking for server-side sharding")
		return
	}
	// Unstructured, since the metadata-only list drops ShardInfo.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err = s.r.mgr.GetAPIReader().List(ctx, list, &client.ListOptions{Limit: 1, Raw: &metav1.ListOptions{ShardSelector: sel}})
	var shardInfo map[string]any
	if err == nil {
		shardInfo, _, err = unstructured.NestedMap(list.Object, "metadata", "shardInfo")
	}
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.logger.Error(err, "checking for server-side sharding failed; filtering on the client")
		}
	case shardInfo != nil:
		s.serverSharding.Store(int32(ShardingServed))
		if s.spec.CacheOwnShards {
			s.logger.Info("the API server serves sharded list and watch; caching only the objects of the shards led here", "kind", gvk.Kind)
		} else {
			s.logger.Info("the API server serves sharded list and watch, but CacheOwnShards is off; caching every object and filtering on the client", "kind", gvk.Kind)
		}
	default:
		s.serverSharding.Store(int32(ShardingNotServed))
		s.logger.Info("the API server does not serve sharded list and watch (feature gate ShardedListAndWatch off); caching every object and filtering on the client", "kind", gvk.Kind, "cacheOwnShards", s.spec.CacheOwnShards)
	}
}
