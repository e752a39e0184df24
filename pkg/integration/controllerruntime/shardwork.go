package controllerruntime

import (
	"context"
	"fmt"
	"sync"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// newShardWorkers returns the Workers of s.spec.ShardWork, nil when it has no
// works. Its defaults are the single leader's: the Runtime's logger, overstay bound
// (GracefulShutdownTimeout) and step-down (the shard's term is resigned, as the
// single leader's is, once a work failed for StepDownGrace in a row). Errors wrap
// ErrInvalidRegistration and name the field.
func (s *Sharded) newShardWorkers() (*sharding.Workers, error) {
	c := s.spec
	config := c.ShardWork
	if len(config.Works) == 0 {
		if config.RestartDelay != 0 || config.StepDownGrace != 0 || config.OverstayAfter != 0 ||
			config.StepDown != nil || config.Logger != nil {
			return nil, fmt.Errorf("%w: sharded controller %q: ShardWork has no Works", ErrInvalidRegistration, c.Name)
		}
		return nil, nil
	}
	if config.Logger == nil {
		config.Logger = toSlog(s.logger)
	}
	if config.OverstayAfter == 0 {
		config.OverstayAfter = s.r.stopTimeout
	}
	if config.StepDown == nil {
		// s.sharder is set before the Runtime starts, so before any shard term.
		config.StepDown = func(t sharding.ShardTerm, _ error) bool { return s.sharder.ResignShard(t) }
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
