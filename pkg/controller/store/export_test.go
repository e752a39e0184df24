package store

// SetCheckShared turns Memory's read-only check on or off for a test and
// returns the function that restores the previous setting. Not for
// parallel tests.
func SetCheckShared(on bool) (restore func()) {
	prev := checkShared
	checkShared = on
	return func() { checkShared = prev }
}
