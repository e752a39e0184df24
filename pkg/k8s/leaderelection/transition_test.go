package leaderelection

import (
	"fmt"
	"strings"
	"testing"
)

// TestPhaseTransitions: every phase has its row of legal changes; a legal change
// sets the phase and the data of the phase it enters, clearing the others'; an
// illegal one panics naming both phases, and leaves the campaign as it was.
func TestPhaseTransitions(t *testing.T) {
	if len(legalTransitions) != len(phaseNames) {
		t.Fatalf("legalTransitions has %d rows for %d phases", len(legalTransitions), len(phaseNames))
	}
	c := &campaign{}
	c.becomeHolding(heldTerm{term: 7})
	c.becomeLeading(&termContext{})
	if c.phase != leading || c.held != (heldTerm{}) || c.term == nil {
		t.Fatalf("after holding → leading: phase %s, held %+v, term %v", c.phase, c.held, c.term)
	}
	c.becomeFollowing()
	c.becomeHandingOver(handoverRequest{target: "b"})
	if c.phase != handingOver || c.handover.target != "b" || c.term != nil {
		t.Fatalf("after leading → following → handingOver: phase %s, handover %+v, term %v", c.phase, c.handover, c.term)
	}
	for _, tc := range []struct {
		from phase
		to   func(*campaign)
		name string
	}{
		{leading, (*campaign).becomeAcquiring, "acquiring"},
		{leading, func(c *campaign) { c.becomeHolding(heldTerm{}) }, "holding"},
		{acquiring, func(c *campaign) { c.becomeLeading(&termContext{}) }, "leading"},
		{handingOver, func(c *campaign) { c.becomeHandingOver(handoverRequest{}) }, "handing over"},
	} {
		c := &campaign{phase: tc.from}
		got := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			tc.to(c)
			return ""
		}()
		want := fmt.Sprintf("illegal phase change %s → %s", tc.from, tc.name)
		if !strings.Contains(got, want) || c.phase != tc.from {
			t.Errorf("%s → %s: panic %q, phase after %s; want a panic naming %q and the phase kept", tc.from, tc.name, got, c.phase, want)
		}
	}
}
