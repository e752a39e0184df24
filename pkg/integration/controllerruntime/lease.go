package controllerruntime

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/termctx"
)

// Annotations that name the term on the Lease itself, for the API server's fence
// (NewAdmissionFence). A term of Baton's elector is one acquisition of the Lease: its
// holderIdentity and acquireTime are set by the acquiring write and kept by every renew
// until the next acquisition, so the pair names the term on the Lease, where the
// policy can compare it. (The term number is the resourceVersion of the acquiring
// write, which later renews move on: it is not on the Lease to compare.)
const (
	// HolderAnnotation is the Lease's holderIdentity in the writer's term.
	HolderAnnotation = "baton.dev/lease-holder"
	// AcquiredAnnotation is the Lease's acquireTime in the writer's term, RFC 3339 with
	// microseconds, as the Lease stores it.
	AcquiredAnnotation = "baton.dev/lease-acquired"
)

// Annotations that name the shard term of a sharded controller's write on its shard's
// Lease, for the API server's fence of a ring (NewShardedAdmissionFence): the same
// token as HolderAnnotation and AcquiredAnnotation, of the shard's Lease, and the
// name of that Lease. They are apart from the single leader's, so that neither fence
// judges the other's writes.
const (
	// ShardLeaseAnnotation is the name of the shard Lease of the writer's term
	// (sharding.ShardLeaseName).
	ShardLeaseAnnotation = "baton.dev/shard-lease"
	// ShardHolderAnnotation is the shard Lease's holderIdentity in the writer's term.
	ShardHolderAnnotation = "baton.dev/shard-lease-holder"
	// ShardAcquiredAnnotation is the shard Lease's acquireTime in the writer's term,
	// as AcquiredAnnotation.
	ShardAcquiredAnnotation = "baton.dev/shard-lease-acquired"
)

// leaseToken is what names a term on the Lease: its holder and acquireTime.
type leaseToken struct {
	holder, acquired string
}

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
	token leaseToken
}

// stamp adds the token of ref's term on this Lease to s, in the annotations of the
// fence bound to it.
func (l *leaseReader) stamp(s stamps, tok leaseToken) {
	if l.shard {
		s[ShardLeaseAnnotation], s[ShardHolderAnnotation], s[ShardAcquiredAnnotation] = l.name, tok.holder, tok.acquired
		return
	}
	s[HolderAnnotation], s[AcquiredAnnotation] = tok.holder, tok.acquired
}

// tokened reports whether s carries a Lease token, for the API server's fence.
func (s stamps) tokened() bool {
	_, single := s[HolderAnnotation]
	_, shard := s[ShardHolderAnnotation]
	return single || shard
}

// holds reads the Lease (a quorum read) and reports whether this replica holds it in
// the term of ref: the holder is this replica and the term has not ended by the time
// the answer came. A later term of this replica starts only after ref's ended, so
// the record read is ref's term's acquisition; its token is returned.
func (l *leaseReader) holds(ctx context.Context, ref *termRef) (leaseToken, bool, error) {
	lease, err := l.cs.CoordinationV1().Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return leaseToken{}, false, fmt.Errorf("controllerruntime: reading Lease %s/%s: %w", l.namespace, l.name, err)
	}
	if ref.ended() != nil {
		return leaseToken{}, false, nil
	}
	spec := lease.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity != l.identity || spec.AcquireTime == nil {
		return leaseToken{}, false, nil
	}
	return leaseToken{holder: l.identity, acquired: formatMicro(*spec.AcquireTime)}, true, nil
}

// token returns the Lease token of ref's term, or an error wrapping ErrTermEnded when
// the Lease is no longer this replica's in that term. The first answer is kept for the
// term; writers that ask before it came each read the Lease (under their own context,
// not l.mu): every read that finds the term running finds the same token, since a
// term is one acquisition.
func (l *leaseReader) token(ctx context.Context, ref *termRef) (leaseToken, error) {
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
func (l *leaseReader) keep(term uint64, tok leaseToken) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept == nil || l.kept.term <= term {
		l.kept = &keptToken{term: term, token: tok}
	}
}

// formatMicro formats t as the Lease stores a MicroTime.
func formatMicro(t metav1.MicroTime) string {
	return t.UTC().Format(metav1.RFC3339Micro)
}

// termRef is the term a write belongs to, as termctx.Get gave it from ctx, the write's
// context, and the Lease of that term the fence may read (nil: none).
type termRef struct {
	term  uint64
	t     termctx.Term
	ctx   context.Context
	lease *leaseReader
}
