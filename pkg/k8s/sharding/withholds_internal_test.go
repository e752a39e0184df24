package sharding

import (
	"testing"
	"time"
)

// TestWithholds: a member's join is the first write seen of its incarnation, kept
// through its renewals and moved by a new incarnation; a holder is taken to withhold
// its hand-overs from a target that has not written since the holder joined, and
// from no one when a Version is not a number.
func TestWithholds(t *testing.T) {
	const d = 15 * time.Second
	var l liveness
	now := time.Unix(1000, 0)
	lease := func(id, inc, version string) MemberLease {
		return MemberLease{Identity: id, Incarnation: inc, Version: version, LeaseDuration: d}
	}
	check := func(when string, holder, target string, want bool) {
		t.Helper()
		if got := withholds(l.writes(), holder, target); got != want {
			t.Errorf("%s: withholds(%s, %s) = %v, want %v (writes %v)", when, holder, target, got, want, l.writes())
		}
	}
	l.observe(now, []MemberLease{lease("a", "a1", "5"), lease("b", "b1", "7")}, d)
	check("first view", "b", "a", true) // a's last write (5) is before b's first seen (7): b may have seen a only on its first view
	check("first view", "a", "b", false)
	l.observe(now, []MemberLease{lease("a", "a1", "9"), lease("b", "b1", "7")}, d)
	if w := l.writes()["a"]; w.joined != 5 || w.last != 9 {
		t.Errorf("a renewed: writes %+v, want joined 5 (its incarnation's first seen), last 9", w)
	}
	check("a renewed", "b", "a", false)
	l.observe(now, []MemberLease{lease("a", "a1", "9"), lease("b", "b2", "12")}, d)
	if w := l.writes()["b"]; w.joined != 12 {
		t.Errorf("b restarted: writes %+v, want joined 12 (its new incarnation's)", w)
	}
	check("b restarted", "b", "a", true)
	l.observe(now, []MemberLease{lease("a", "a1", "14"), lease("b", "b2", "12")}, d)
	check("a renewed after b's restart", "b", "a", false)
	l.observe(now, []MemberLease{lease("a", "a1", "x"), lease("b", "b2", "12")}, d)
	check("a Version not a number", "b", "a", false)
	check("an unknown target", "b", "c", false)
}
