// Package replicatest is the name this repository's tests knew part of package
// batontest by, before the kit was public: Partition is a batontest.Switch that only
// cuts, Watch is batontest.WatchStamps, WaitFor is batontest.WaitFor.
//
// Deprecated: use github.com/baton-dev/baton/pkg/batontest. This package remains only
// until the tests that import it move; it adds nothing.
package replicatest
