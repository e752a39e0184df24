package sharding

import (
	"context"
	"sync"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// sharedDeaths is the DeathWatch of a Sharder's shard electors: one call of the
// configured DeathWatch per incarnation, shared by every elector that follows that
// holder (a replica holding 20 shards is one pod watch, not 20). Safe for concurrent
// use.
type sharedDeaths struct {
	watch leaderelection.DeathWatch

	// mu guards watches.
	mu      sync.Mutex
	watches map[string]*sharedDeath
}

// sharedDeath is one incarnation's watch and the electors that follow it.
type sharedDeath struct {
	ready chan struct{}      // closed once dead is set
	dead  <-chan struct{}    // the DeathWatch's channel
	stop  context.CancelFunc // ends the DeathWatch's work
	users int                // the Dead calls whose context has not ended
}

var _ leaderelection.DeathWatch = (*sharedDeaths)(nil)

func newSharedDeaths(w leaderelection.DeathWatch) *sharedDeaths {
	return &sharedDeaths{watch: w, watches: map[string]*sharedDeath{}}
}

// Dead returns the channel of incarnation's shared watch, starting it if none runs:
// the call that starts it calls the DeathWatch outside the lock, and the calls that
// join meanwhile wait for its channel. The watch ends once the contexts of all the
// calls that share it ended.
func (d *sharedDeaths) Dead(ctx context.Context, incarnation string) <-chan struct{} {
	d.mu.Lock()
	w := d.watches[incarnation]
	start := w == nil
	var wctx context.Context
	if start {
		w = &sharedDeath{ready: make(chan struct{})}
		wctx, w.stop = context.WithCancel(context.Background())
		d.watches[incarnation] = w
	}
	w.users++
	d.mu.Unlock()
	if start {
		w.dead = d.watch.Dead(wctx, incarnation)
		close(w.ready)
	} else {
		<-w.ready
	}
	context.AfterFunc(ctx, func() { d.leave(incarnation, w) })
	return w.dead
}

// leave counts one user of w less, and ends w when it was the last.
func (d *sharedDeaths) leave(incarnation string, w *sharedDeath) {
	d.mu.Lock()
	w.users--
	last := w.users == 0
	if last && d.watches[incarnation] == w {
		delete(d.watches, incarnation)
	}
	d.mu.Unlock()
	if last {
		w.stop()
	}
}
