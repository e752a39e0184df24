package shardingtest

import (
	"context"
	"errors"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// ErrCut is what every call of a store cut off by Cut returns.
var ErrCut = errors.New("shardingtest: cut off from the store")

// Cut returns stores that pass calls to stores until down is closed, and then fail
// every call with ErrCut and end every watch: a replica crashed or cut off from the
// API server, as the others see it. Every member event is also delivered lag late
// (0 for none), so that views of the members lag behind the shard Leases as on a
// real API server, where the watches race.
func Cut(stores sharding.Stores, down <-chan struct{}, lag time.Duration) sharding.Stores {
	return sharding.Stores{
		Shard:   func(i int) leaderelection.LeaseStore { return &cutLease{LeaseStore: stores.Shard(i), down: down} },
		Members: &cutMembers{MemberStore: stores.Members, down: down, lag: lag},
	}
}

type cutLease struct {
	leaderelection.LeaseStore
	down <-chan struct{}
}

func isDown(down <-chan struct{}) bool {
	select {
	case <-down:
		return true
	default:
		return false
	}
}

func (c *cutLease) Get(ctx context.Context) (leaderelection.LeaseRecord, error) {
	if isDown(c.down) {
		return leaderelection.LeaseRecord{}, ErrCut
	}
	return c.LeaseStore.Get(ctx)
}

func (c *cutLease) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if isDown(c.down) {
		return leaderelection.LeaseRecord{}, ErrCut
	}
	return c.LeaseStore.Create(ctx, r)
}

func (c *cutLease) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if isDown(c.down) {
		return leaderelection.LeaseRecord{}, ErrCut
	}
	return c.LeaseStore.Update(ctx, r)
}

// Watch relays the store's watch until the replica crashes.
func (c *cutLease) Watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	return relay(ctx, c.down, 0, c.LeaseStore.Watch)
}

// cutMembers also delays every member event by lag.
type cutMembers struct {
	sharding.MemberStore
	down <-chan struct{}
	lag  time.Duration
}

func (c *cutMembers) Renew(ctx context.Context, l sharding.MemberLease) (string, error) {
	if isDown(c.down) {
		return "", ErrCut
	}
	return c.MemberStore.Renew(ctx, l)
}

func (c *cutMembers) Leave(ctx context.Context, id string) error {
	if isDown(c.down) {
		return ErrCut
	}
	return c.MemberStore.Leave(ctx, id)
}

func (c *cutMembers) Expire(ctx context.Context, id, version string) error {
	if isDown(c.down) {
		return ErrCut
	}
	return c.MemberStore.Expire(ctx, id, version)
}

func (c *cutMembers) Watch(ctx context.Context) (<-chan sharding.MemberEvent, error) {
	return relay(ctx, c.down, c.lag, c.MemberStore.Watch)
}

// relay opens watch and relays its events, each lag late, until down is closed or
// ctx ends; then it stops the watch and drains it before closing its own channel.
func relay[E any](ctx context.Context, down <-chan struct{}, lag time.Duration, watch func(context.Context) (<-chan E, error)) (<-chan E, error) {
	if isDown(down) {
		return nil, ErrCut
	}
	ctx, cancel := context.WithCancel(ctx)
	in, err := watch(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan E)
	go func() {
		defer close(out)
		defer func() {
			cancel()
			for range in {
			}
		}()
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				if lag > 0 {
					time.Sleep(lag)
				}
				select {
				case out <- ev:
				case <-down:
					return
				case <-ctx.Done():
					return
				}
			case <-down:
				return
			}
		}
	}()
	return out, nil
}
