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

// The stamps of a fenced write for the API server's fences, pkg/fence's (where every
// writer finds them; each is documented there): the Lease token of the writer's term,
// for the single leader's Lease (HolderAnnotation, AcquiredAnnotation; the fence of
// NewAdmissionFence) or a shard's (ShardLeaseAnnotation names that Lease; the fence of
// NewShardedAdmissionFence; apart, so that neither fence judges the other's writes),
// and the label that marks the object for the fence of that Lease (FenceLabel,
// ShardFenceLabel, whose value is the Lease's name): each binding selects objects by
// it, so a write to an object no fenced write marked is never refused. Why a token
// and not the term number: docs/design/controllerruntime.md, # The API server's fence.
const (
	HolderAnnotation        = fence.HolderAnnotation
	AcquiredAnnotation      = fence.AcquiredAnnotation
	ShardLeaseAnnotation    = fence.ShardLeaseAnnotation
	ShardHolderAnnotation   = fence.ShardHolderAnnotation
	ShardAcquiredAnnotation = fence.ShardAcquiredAnnotation
	FenceLabel              = fence.FenceLabel
	ShardFenceLabel         = fence.ShardFenceLabel
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
