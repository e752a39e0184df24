package leaderelection

import (
	"context"
	"sync"
)

// leaderWork runs each term's OnStartedLeading on one goroutine, started with the
// first term and kept for the next ones. A campaign runs at most one at a time: it
// does not acquire while the last term's OnStartedLeading runs (acquireTime), so one
// goroutine serves every term, and a term costs no goroutine, closure or channel. It
// is used by the election goroutine only.
type leaderWork struct {
	// terms carries each term to the goroutine (room for one: the goroutine is idle
	// when a term starts); nil before the first term. Closed by close.
	terms chan *termContext
	// done receives one value per term once its OnStartedLeading returned (room for
	// one: the campaign takes it before the next term starts).
	done   chan struct{}
	closed bool
}

// run hands t to the goroutine, starting it (counted by wg) on the first term, and
// returns the channel that receives once f(t) returned.
func (w *leaderWork) run(wg *sync.WaitGroup, f func(context.Context), t *termContext) <-chan struct{} {
	if w.terms == nil {
		terms, done := make(chan *termContext, 1), make(chan struct{}, 1)
		w.terms, w.done = terms, done
		wg.Go(func() {
			for t := range terms {
				f(t)
				done <- struct{}{}
			}
		})
	}
	w.terms <- t
	return w.done
}

// close makes the goroutine return once the term it runs (if any) returned. Later
// calls do nothing.
func (w *leaderWork) close() {
	if w.terms != nil && !w.closed {
		close(w.terms)
		w.closed = true
	}
}
