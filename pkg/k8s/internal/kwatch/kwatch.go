// Package kwatch is the one loop that reads a Kubernetes watch, shared by the stores
// that list and watch by hand (a single Lease, a ring's Leases, a lease holder's pod):
// which events reach the reader, what ends the watch, and the error each end gives.
// What to do after an end (list again, back off) stays with each store, since each
// recovers differently: the elector's campaign reopens on its own schedule, a ring's
// readers each list again, and the pod watcher backs off.
package kwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

// ErrClosed is Read's error when the server ended the watch (its channel closed): a
// normal end, after which the reader lists again.
var ErrClosed = errors.New("kwatch: the server ended the watch")

// ErrSilent is Read's error when the watch delivered nothing, not even a bookmark, for
// longer than its silence bound: it is taken as stuck.
var ErrSilent = errors.New("kwatch: the watch delivered nothing")

// Read hands the Added, Modified and Deleted events of w to fn, in order, and stops w
// before it returns. It returns nil when ctx ends or fn returns false; ErrClosed
// when the server ends the watch; the API error of an Error event (a 410 Gone when
// the version is too old); and, when silence is positive, an error wrapping
// ErrSilent when nothing at all arrived for silence. Bookmarks are not handed to fn,
// but count as a sign of life.
func Read(ctx context.Context, w watch.Interface, silence time.Duration, fn func(watch.Event) bool) error {
	defer w.Stop()
	var quiet <-chan time.Time
	var timer *time.Timer
	if silence > 0 {
		timer = time.NewTimer(silence)
		defer timer.Stop()
		quiet = timer.C
	}
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case <-quiet:
			return fmt.Errorf("%w for %v", ErrSilent, silence)
		case ev, ok = <-w.ResultChan():
		}
		if timer != nil {
			timer.Reset(silence)
		}
		switch {
		case !ok:
			return ErrClosed
		case ev.Type == watch.Error:
			return apierrors.FromObject(ev.Object)
		case ev.Type == watch.Added, ev.Type == watch.Modified, ev.Type == watch.Deleted:
			if !fn(ev) {
				return nil
			}
		}
	}
}
