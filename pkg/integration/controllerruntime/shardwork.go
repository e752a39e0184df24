package controllerruntime

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// newShardWorkers returns the Workers of c.ShardWork, nil when it has no works.
// Errors wrap ErrInvalidRegistration and name the field.
func newShardWorkers(c ShardedController, logger logr.Logger) (*sharding.Workers, error) {
	config := c.ShardWork
	if len(config.Works) == 0 {
		if config.RestartDelay != 0 || config.Logger != nil {
			return nil, fmt.Errorf("%w: sharded controller %q: ShardWork has no Works", ErrInvalidRegistration, c.Name)
		}
		return nil, nil
	}
	if config.Logger == nil {
		config.Logger = toSlog(logger)
	}
	w, err := sharding.NewWorkers(config)
	if err != nil {
		return nil, fmt.Errorf("%w: sharded controller %q: ShardWork: %w", ErrInvalidRegistration, c.Name, err)
	}
	return w, nil
}

// runShardWork starts the ShardWork of the shard term of ctx and returns the
// function that waits for it, which returns once ctx ended and every work returned.
func (s *Sharded) runShardWork(ctx context.Context) (wait func()) {
	if s.workers == nil {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.workers.RunShard(ctx) })
	return wg.Wait
}

// ShardWorkStats returns the counters of the controller's ShardWork, zero without.
func (s *Sharded) ShardWorkStats() sharding.WorkStats {
	if s.workers == nil {
		return sharding.WorkStats{}
	}
	return s.workers.Stats()
}
