package leaderelection

// Resign ends term early if this replica leads it, so that another replica
// leads instead (see k8sle.Elector.Resign): the term's LostLeadershipEvent
// carries ReasonResigned, the lease is released, and this replica holds off
// its next campaign for a LeaseDuration. reason is logged. It reports
// whether the term was ended; false for another term, a term already over,
// or election disabled. It is meant for lifecycle.Options.StepDown. Safe from
// any goroutine; it never blocks.
func (c *Component) Resign(term uint64, reason error) bool {
	ok := c.elector.Resign(term)
	if ok {
		c.logger.Warn("resigning leadership so that another replica leads", "term", term, "reason", reason)
	} else {
		c.logger.Info("not resigning: not leading that term, or leading alone", "term", term, "reason", reason)
	}
	return ok
}
