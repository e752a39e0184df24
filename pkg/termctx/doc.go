// Package termctx carries a leadership term in a context: the one accessor
// for "which term is this leader-only work running in", whoever started it.
//
// # Usage
//
// A leader-only component reads the term it runs in, to fence its writes with:
//
//	term, ok := termctx.Get(ctx)  // the Lease, the shard, the number, the token
//	n, ok := termctx.FromContext(ctx) // the number alone
//	if err := termctx.Err(ctx); err != nil { ... } // the term is over
//
// # The model
//
// A Term is one term of a Lease (its fields say what each part is for); a
// single leader's term is the one-shard case of a ring's shard term.
//
// The elector (pkg/k8s/leaderelection) stamps the context of each term it
// leads with all of it; the sharder (pkg/k8s/sharding) adds the shard to
// its shard electors' terms; the controller runtime (pkg/controller/lifecycle)
// stamps the context of each term it runs with its source's term (the
// elector's), or with the number alone when it has no source. The
// controller-runtime integration's fenced client reads all of it from here.
//
// A context derived from a stamped one carries the same term; a term
// stamped later, on a derived context, shadows it. Err asks the context the
// term was stamped on, at the call, so an end that context reports by a
// clock of its own (an elector's renew deadline) is seen through contexts
// derived from it before any cancellation reached them.
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
