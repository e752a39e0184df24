package leaderelection

import "errors"

// Resign ends term early, if it is the term this elector leads now, so that
// another candidate leads instead: the term context ends with cause
// ErrResigned (OnStoppedLeading runs as for any end of term), the election
// goroutine clears the lease's holder with a compare-and-swap once the term's
// OnStartedLeading returned, as a release does, so that the other candidates
// may take it at once, and this elector
// does not campaign again for a LeaseDuration, so that one of them does (it takes a
// hand-over to it meanwhile all the same: its writer chose it). It
// reports whether it ended the term: false for any other term, once the term
// ended, and with election disabled (a replica leading alone has nobody to
// hand over to). Safe from any goroutine; it never blocks.
func (e *Elector) Resign(term uint64) bool {
	if e.config.SingleReplica {
		return false
	}
	t := e.current.Load()
	if t == nil || t.Term() != term || t.Err() != nil {
		return false
	}
	t.end(ErrResigned)
	e.logger.Info("resigning", "term", term)
	return true
}

// resigned follows the end of a term by Resign (or, with release set, by any
// cause), on the election goroutine: like a hand-over to nobody, the lease is
// released once the term's OnStartedLeading returned, and the next campaign is held
// back by a LeaseDuration (finishHandOver).
func (c *campaign) resigned(cause error, release bool) {
	if !release && !errors.Is(cause, ErrResigned) || c.phase != following {
		return
	}
	c.becomeHandingOver(handoverRequest{})
}
