package leaderelection

import (
	"context"
	"errors"
	"time"
)

// Resign ends term early, if it is the term this elector leads now, so that
// another candidate leads instead: the term context ends with cause
// ErrResigned (OnStoppedLeading runs as for any end of term); once the term's
// OnStartedLeading returned, the election goroutine releases the lease with a
// compare-and-swap, as HandOver does but naming no preferred holder, so that
// the other candidates may take it at once; and this elector does not
// campaign again for a LeaseDuration, so that one of them does. It reports
// whether it ended the term: false for any other term, once the term ended,
// and for a SingleReplica elector (a replica leading alone has nobody to hand
// over to). Safe from any goroutine; it never blocks.
func (e *Elector) Resign(term uint64) bool {
	if e.config.SingleReplica {
		return false
	}
	t := e.current.Load()
	if t == nil || t.term != term || t.Err() != nil {
		return false
	}
	t.end(ErrResigned)
	e.logger.Info("resigning", "term", term)
	return true
}

// endTerm steps down from a term whose context ended; after Resign it also
// schedules the release (as a hand-over to nobody, written once the leader
// work returned) and holds the next campaign back by a LeaseDuration.
func (c *campaign) endTerm() {
	cause := context.Cause(c.term)
	c.stepDown(cause)
	if !errors.Is(cause, ErrResigned) || c.handover != nil {
		return
	}
	c.handover = &handoverRequest{}
	c.holdUntil = later(c.holdUntil, time.Now().Add(c.e.config.LeaseDuration))
}
