// Package fence is Baton's one fencing implementation: the stamps a write of a term
// carries, and the check of a write against the stamp on the object it replaces.
// Every writer uses it: the controller-runtime fenced client
// (pkg/integration/controllerruntime), whose sharded reconciles write through it too,
// and the reference controller's publisher (pkg/controller/configpublisher).
//
// # Usage
//
//	s := fence.ForTerm(term).WithLease("baton-leader", tok) // tok: the Lease's token of the term
//	annotations, labels := s.Split()                        // set both on the object written
//	stamped, _, err := fence.Stamped(cur.GetAnnotations())  // the stamp of the object replaced
//	replaced, err := fence.Judge(ctx, "ConfigMap default/x", stamped, term, holds)
//
// # The stamps
//
// TermAnnotation is the decimal term of the writer, which the writer compares before
// it writes (Judge). With the API server's fence, a write also carries the Lease token
// of its term (HolderAnnotation and AcquiredAnnotation, or the Shard ones for a shard's
// Lease) and the label that marks the object for that fence (FenceLabel,
// ShardFenceLabel), whose value is the Lease's name: the ValidatingAdmissionPolicy of
// pkg/integration/controllerruntime (NewAdmissionFence, NewShardedAdmissionFence)
// compares the token with the Lease, and judges only objects so labelled.
//
// # The check
//
// Judge refuses a write of term over an object stamped with a newer term
// (ErrStaleTerm), unless the caller's holds says this replica still holds the Lease in
// term: then no term of this Lease wrote that stamp (a later term needs a later
// acquisition, which would have ended this one), and the write replaces it. The check
// alone does not fence: the write must then be a compare-and-swap on the version
// judged, so that a newer term's write in between makes it conflict.
//
// # Concurrency properties
//
// Everything here is a pure function of its arguments, safe for concurrent use;
// Judge calls holds at most once, on the caller's goroutine.
package fence
