package leaderelection

import "fmt"

// The campaign's phase changes happen here, and only here: each becomeX sets the
// phase and that phase's data (holding: held; leading: term; handingOver: handover),
// clears the data of the phase it leaves, and checks that the change is one of
// legalTransitions. An illegal change is a defect of the elector, not of the cluster
// or the caller: it panics, naming both phases, as etcd/raft's transitions do, rather
// than run on with a campaign whose phase and data disagree.

// legalTransitions lists, for each phase, the phases a campaign may go to from it:
//
//	following   → acquiring    an acquiring write is sent (acquire)
//	following   → holding      it landed, and the term must wait (hold, awaitWriteEvent)
//	following   → leading      it landed, and the term starts (startTerm)
//	following   → handingOver  a term ended by a hand-over or Resign (beginHandOver, resigned)
//	acquiring   → following    the write was answered (acquire)
//	holding     → holding      a held write is held on, for a LeaseDuration (hold)
//	holding     → leading      the held term starts (stepHeld)
//	holding     → following    the held term is given up (dropHeld)
//	leading     → following    the term ends (stepDown)
//	handingOver → following    the release is written (finishHandOver)
var legalTransitions = [...][]phase{
	following:   {acquiring, holding, leading, handingOver},
	acquiring:   {following},
	holding:     {holding, leading, following},
	leading:     {following},
	handingOver: {following},
}

// become moves the campaign to phase to, or panics when legalTransitions does not
// allow it from the current phase.
func (c *campaign) become(to phase) {
	for _, ok := range legalTransitions[c.phase] {
		if ok == to {
			c.phase = to
			return
		}
	}
	panic(fmt.Sprintf("leaderelection: illegal phase change %s → %s", c.phase, to))
}

// becomeFollowing ends the current phase's data and follows the lease.
func (c *campaign) becomeFollowing() {
	c.become(following)
	c.held, c.term, c.handover = heldTerm{}, nil, handoverRequest{}
}

// becomeAcquiring marks an acquiring write under way.
func (c *campaign) becomeAcquiring() { c.become(acquiring) }

// becomeHolding holds the lease for the term held describes.
func (c *campaign) becomeHolding(held heldTerm) {
	c.become(holding)
	c.held = held
}

// becomeLeading starts leading the term t.
func (c *campaign) becomeLeading(t *termContext) {
	c.become(leading)
	c.held, c.term = heldTerm{}, t
}

// becomeHandingOver waits for the ended term's work before writing the release req
// asks for (req is zero for a Resign).
func (c *campaign) becomeHandingOver(req handoverRequest) {
	c.become(handingOver)
	c.handover = req
}
