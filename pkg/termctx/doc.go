// Package termctx carries a leadership term in a context: the one accessor
// for "which term is this leader-only work running in", whoever started it.
//
// # Usage
//
// The elector (pkg/k8s/leaderelection) stamps the context of each term it
// leads, and the controller runtime (pkg/controller/lifecycle) stamps the
// context of each term it runs; a leader-only component reads the term it
// runs in, to fence its writes with:
//
//	term, ok := termctx.FromContext(ctx)
//
// A context derived from a stamped one carries the same term; a term
// stamped later, on a derived context, shadows it.
//
// # Layers
//
// This package is in the core, below both the elector and the runtime: it
// imports only the standard library, so the pure election needs nothing of
// the bus and the runtime nothing of Kubernetes to share the term.
//
// # Concurrency properties
//
// Contexts are immutable; every function is safe for concurrent use.
package termctx
