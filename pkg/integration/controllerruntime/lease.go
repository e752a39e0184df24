package controllerruntime

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/fence"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Annotations that name the term on the Lease itself, for the API server's fence
// (NewAdmissionFence): pkg/fence's, where every writer finds them. A term of Baton's
// elector is one acquisition of the Lease: its holderIdentity and acquireTime are set
// by the acquiring write and kept by every renew until the next acquisition, so the
// pair names the term on the Lease, where the policy can compare it. (The term number
// is the resourceVersion of the acquiring write, which later renews move on: it is not
// on the Lease to compare.)
const (
	// HolderAnnotation is the Lease's holderIdentity in the writer's term.
	HolderAnnotation = fence.HolderAnnotation
	// AcquiredAnnotation is the Lease's acquireTime in the writer's term, RFC 3339 with
	// microseconds, as the Lease stores it.
	AcquiredAnnotation = fence.AcquiredAnnotation
)

// Annotations that name the shard term of a sharded controller's write on its shard's
// Lease, for the API server's fence of a ring (NewShardedAdmissionFence): the same
// token as HolderAnnotation and AcquiredAnnotation, of the shard's Lease, and the
// name of that Lease. They are apart from the single leader's, so that neither fence
// judges the other's writes.
const (
	// ShardLeaseAnnotation is the name of the shard Lease of the writer's term
	// (sharding.ShardLeaseName).
	ShardLeaseAnnotation = fence.ShardLeaseAnnotation
	// ShardHolderAnnotation is the shard Lease's holderIdentity in the writer's term.
	ShardHolderAnnotation = fence.ShardHolderAnnotation
	// ShardAcquiredAnnotation is the shard Lease's acquireTime in the writer's term,
	// as AcquiredAnnotation.
	ShardAcquiredAnnotation = fence.ShardAcquiredAnnotation
)

// Labels that mark the objects the API server's fences judge (pkg/fence's). With
// Options.ServerSideFence a fenced write sets the label of the fence of its term's
// Lease, whose value is that Lease's name; the fence's binding selects objects by it
// (matchResources.objectSelector, which for an UPDATE matches the old or the new
// object), so a write to an object no fenced write ever marked passes no binding: it is
// never refused, whatever the state of the Lease (see docs/design/controllerruntime.md, # The API
// server's fence).
const (
	// FenceLabel marks an object written in a term of the single leader's Lease (the
	// fence of NewAdmissionFence); its value is that Lease's name.
	FenceLabel = fence.FenceLabel
	// ShardFenceLabel marks an object written in a shard's term (the fence of
	// NewShardedAdmissionFence); its value is the shard Lease's name, so each write
	// passes the binding of that shard only.
	ShardFenceLabel = fence.ShardFenceLabel
)

// leaseReader reads one of this replica's Leases from the API server: the single
// leader's, or a shard's.
type leaseReader struct {
	cs              kubernetes.Interface
	namespace, name string
	identity        string
	// admission: the API server's fence is bound to this Lease (NewAdmissionFence for
	// the single leader's, NewShardedAdmissionFence for a shard's), so writes of its
	// terms carry its token (Options.ServerSideFence).
	admission bool
	// shard: a shard's Lease; its token goes in the Shard*Annotation stamps, with its
	// name.
	shard bool

	// mu guards kept.
	mu   sync.Mutex
	kept *keptToken // the token of the last term that asked, once read
}

// keptToken is the Lease token of one term of the Lease.
type keptToken struct {
	term  uint64
	token fence.Token
}

// stamp adds the token of ref's term on this Lease to s, in the annotations of the
// fence bound to it, and that fence's label.
func (l *leaseReader) stamp(s stamps, tok fence.Token) {
	if l.shard {
		fence.Stamps(s).WithShardLease(l.name, tok)
		return
	}
	fence.Stamps(s).WithLease(l.name, tok)
}

// holds reads the Lease (a quorum read) and reports whether this replica holds it in
// the term of ref: the holder is this replica and the term has not ended by the time
// the answer came. A later term of this replica starts only after ref's ended, so
// the record read is ref's term's acquisition; its token is returned.
func (l *leaseReader) holds(ctx context.Context, ref *termRef) (fence.Token, bool, error) {
	lease, err := l.cs.CoordinationV1().Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return fence.Token{}, false, fmt.Errorf("controllerruntime: reading Lease %s/%s: %w", l.namespace, l.name, err)
	}
	if ref.ended() != nil {
		return fence.Token{}, false, nil
	}
	spec := lease.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity != l.identity || spec.AcquireTime == nil {
		return fence.Token{}, false, nil
	}
	return fence.Token{Holder: l.identity, Acquired: spec.AcquireTime.Time}, true, nil
}

// token returns the Lease token of ref's term, or an error wrapping ErrTermEnded when
// the Lease is no longer this replica's in that term. The first answer is kept for the
// term; writers that ask before it came each read the Lease (under their own context,
// not l.mu): every read that finds the term running finds the same token, since a
// term is one acquisition.
func (l *leaseReader) token(ctx context.Context, ref *termRef) (fence.Token, error) {
	l.mu.Lock()
	kept := l.kept
	l.mu.Unlock()
	if kept != nil && kept.term == ref.term {
		return kept.token, nil
	}
	tok, ok, err := l.holds(ctx, ref)
	if err != nil {
		return tok, err
	}
	if !ok {
		return tok, &termEndedError{term: ref.term, cause: fmt.Errorf("the Lease %s/%s is not held by %s in this term", l.namespace, l.name, l.identity)}
	}
	l.keep(ref.term, tok)
	return tok, nil
}

// keep keeps tok as the token of term, unless a later term's is kept.
func (l *leaseReader) keep(term uint64, tok fence.Token) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept == nil || l.kept.term <= term {
		l.kept = &keptToken{term: term, token: tok}
	}
}

// termRef is the term a write belongs to, as termctx.Get gave it from ctx, the write's
// context, and the Lease of that term the fence may read (nil: none).
type termRef struct {
	term  uint64
	t     termctx.Term
	ctx   context.Context
	lease *leaseReader
}
