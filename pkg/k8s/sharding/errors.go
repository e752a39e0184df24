package sharding

import (
	"errors"

	"github.com/baton-dev/baton/pkg/termrun"
)

// Sentinel errors. Errors returned by this package wrap them, so test with errors.Is.
var (
	// ErrInvalidRing is wrapped by the errors of NewRing and of a ring's methods given
	// a shard that is not in the ring.
	ErrInvalidRing = errors.New("sharding: invalid ring")
	// ErrNoShards is returned by Ring.Selector for an empty set of shards: the empty
	// selector would select every object, the opposite of what an empty set means.
	ErrNoShards = errors.New("sharding: no shards to select")
	// ErrInvalidConfig is wrapped by every configuration error of New, NewWithStores
	// and NewWorkers; the message names the offending field.
	ErrInvalidConfig = errors.New("sharding: invalid config")
	// ErrAlreadyStarted is returned by a second call of Sharder.Run.
	ErrAlreadyStarted = errors.New("sharding: sharder already started")
	// ErrWorkPanicked is wrapped by the error of a Work's run that panicked, as
	// Workers logs it: termrun.ErrPanicked, the one runner's.
	ErrWorkPanicked = termrun.ErrPanicked
)
