// Package layout holds no code, only the test that keeps the repository's
// two layers apart: the core (the bus, the replayer, the elector, the
// adapter, the runtime, the term accessor, the generic metrics and health,
// the controller-runtime integration) must not depend, directly or
// through anything it imports, on the reference controller built on it.
//
// # The rules
//
// The test runs `go list -deps` on every core package and fails, naming the
// import chain, when a package of this module that is not itself in the
// core is among the dependencies. Narrower rules follow the arrows of the
// architecture: the generic bus (pkg/events) imports no other package of
// this module and nothing of Kubernetes; the pure election
// (pkg/k8s/leaderelection) knows nothing of the bus; the term accessor
// (pkg/termctx) knows nothing of either; and the examples (examples/...)
// import only the core. A second test proves the checker can fail, and a
// third that every package named as reference exists, so a rename cannot
// quietly take a package out of its reach.
//
// Tests of a core package (its _test.go files) are not checked: an example
// may well show a core package driven by reference events.
package layout
