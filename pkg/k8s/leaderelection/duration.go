package leaderelection

import "time"

// BoundLeaseDuration returns how long a holder whose Lease says d may go without
// renewing, as this package's electors judge a holder: d up to MaxLeaseDuration, and
// configured when d is zero or negative (a record with no duration). outOfRange
// reports a d outside the range Baton itself writes (above MaxLeaseDuration, or
// negative), which the caller logs at WARN once per record and counts, as the
// elector does (Stats.OutOfRange). Other Lease readers (the sharding package's member
// Leases) judge their Leases by the same rule.
func BoundLeaseDuration(d, configured time.Duration) (bounded time.Duration, outOfRange bool) {
	switch {
	case d > MaxLeaseDuration:
		return MaxLeaseDuration, true
	case d < 0:
		return configured, true
	case d == 0:
		return configured, false
	}
	return d, false
}
