package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The annotations of a write of a term.
const (
	// TermAnnotation is the writer's term, in decimal.
	TermAnnotation = "baton.dev/term"
	// HolderAnnotation is the single leader's Lease holderIdentity in the writer's
	// term.
	HolderAnnotation = "baton.dev/lease-holder"
	// AcquiredAnnotation is that Lease's acquireTime in the writer's term, RFC 3339
	// with microseconds, as the Lease stores it.
	AcquiredAnnotation = "baton.dev/lease-acquired"
	// ShardLeaseAnnotation is the name of the shard Lease of the writer's term.
	ShardLeaseAnnotation = "baton.dev/shard-lease"
	// ShardHolderAnnotation is the shard Lease's holderIdentity in the writer's term.
	ShardHolderAnnotation = "baton.dev/shard-lease-holder"
	// ShardAcquiredAnnotation is the shard Lease's acquireTime in the writer's term,
	// as AcquiredAnnotation.
	ShardAcquiredAnnotation = "baton.dev/shard-lease-acquired"
)

// The labels that mark an object for the API server's fence of a Lease; the value is
// the Lease's name (so at most 63 characters).
const (
	// FenceLabel marks an object written in a term of the single leader's Lease.
	FenceLabel = "baton.dev/fence-lease"
	// ShardFenceLabel marks an object written in a shard's term.
	ShardFenceLabel = "baton.dev/shard-fence-lease"
)

// ErrStaleTerm is returned by Judge (wrapped) for a write over an object stamped with a
// newer term: a newer leader wrote it.
var ErrStaleTerm = errors.New("fence: object written by a newer term")

// Token names a term on its Lease: the holder and the acquireTime the acquisition
// wrote, which every renew of the term keeps.
type Token struct {
	Holder   string
	Acquired time.Time
}

// FormatAcquired formats t as a Lease stores its acquireTime (a MicroTime): RFC 3339
// with microseconds, in UTC.
func FormatAcquired(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// Stamps are the annotations, and the label (the keys IsLabel names), a write of one
// term carries.
type Stamps map[string]string

// ForTerm returns the stamps of a write of term: TermAnnotation.
func ForTerm(term uint64) Stamps {
	return Stamps{TermAnnotation: strconv.FormatUint(term, 10)}
}

// WithLease adds the token of the single leader's Lease lease and its fence's label,
// and returns s.
func (s Stamps) WithLease(lease string, tok Token) Stamps {
	s[HolderAnnotation], s[AcquiredAnnotation], s[FenceLabel] = tok.Holder, FormatAcquired(tok.Acquired), lease
	return s
}

// WithShardLease adds the token of the shard Lease lease, its name and its fence's
// label, and returns s.
func (s Stamps) WithShardLease(lease string, tok Token) Stamps {
	s[ShardLeaseAnnotation], s[ShardHolderAnnotation], s[ShardAcquiredAnnotation] = lease, tok.Holder, FormatAcquired(tok.Acquired)
	s[ShardFenceLabel] = lease
	return s
}

// IsLabel reports whether the stamp key is a label (the others are annotations).
func IsLabel(key string) bool { return key == FenceLabel || key == ShardFenceLabel }

// Tokened reports whether s carries a Lease token, for the API server's fence.
func (s Stamps) Tokened() bool {
	_, single := s[HolderAnnotation]
	_, shard := s[ShardHolderAnnotation]
	return single || shard
}

// Split returns the annotations and the labels of s (labels nil when s has none).
func (s Stamps) Split() (annotations, labels map[string]string) {
	annotations = make(map[string]string, len(s))
	for k, v := range s {
		if IsLabel(k) {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
			continue
		}
		annotations[k] = v
	}
	return annotations, labels
}

// Carried reports whether an object with these annotations and labels carries every
// stamp.
func (s Stamps) Carried(annotations, labels map[string]string) bool {
	for k, v := range s {
		if IsLabel(k) && labels[k] != v || !IsLabel(k) && annotations[k] != v {
			return false
		}
	}
	return true
}

// Stamped returns the term an object with these annotations was written in: ok is
// false when it carries no TermAnnotation, err is set when that is not a term.
func Stamped(annotations map[string]string) (term uint64, ok bool, err error) {
	v, ok := annotations[TermAnnotation]
	if !ok {
		return 0, false, nil
	}
	term, err = strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("fence: annotation %s: %q is not a term", TermAnnotation, v)
	}
	return term, true, nil
}

// HoldsLease reports, by one read of the Lease, whether this replica still holds it in
// the writer's term.
type HoldsLease func(ctx context.Context) (bool, error)

// Judge checks a write of term over an object stamped with stamped (Stamped's term; 0
// when unstamped). A stamp not above term passes. A newer one is refused with an error
// wrapping ErrStaleTerm and naming what, unless holds (nil: none) reports that this
// replica still holds the Lease in term: then no term of this Lease wrote that stamp,
// and Judge returns it as replaced, for the caller to log, with no error. An error of
// holds is returned as it is.
func Judge(ctx context.Context, what string, stamped, term uint64, holds HoldsLease) (replaced uint64, err error) {
	if stamped <= term {
		return 0, nil
	}
	if holds != nil {
		held, err := holds(ctx)
		if err != nil {
			return 0, err
		}
		if held {
			return stamped, nil
		}
	}
	return 0, fmt.Errorf("%w: %s carries term %d, the writer's term is %d", ErrStaleTerm, what, stamped, term)
}
