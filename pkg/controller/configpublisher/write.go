package configpublisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/baton-dev/baton/pkg/controller/store"
	"github.com/baton-dev/baton/pkg/fence"
)

// Keys of the published object.
const (
	// AnnotationTerm records the term of the leader that wrote the object:
	// the fencing token every write checks (pkg/fence's TermAnnotation, the one
	// every writer of Baton stamps).
	AnnotationTerm = fence.TermAnnotation
	// AnnotationConfigVersion and AnnotationPodGeneration record the inputs
	// the content was built from.
	AnnotationConfigVersion = "baton.dev/config-version"
	AnnotationPodGeneration = "baton.dev/pod-generation"
	// AnnotationStatus is StatusValid or StatusInvalid.
	AnnotationStatus = "baton.dev/status"
	// AnnotationReasons is a JSON array of the reasons, when invalid.
	AnnotationReasons = "baton.dev/reasons"
	// AnnotationInvalidVersion is the version of the refused document, when
	// invalid.
	AnnotationInvalidVersion = "baton.dev/invalid-version"
	// AnnotationPublishedBy is the identity of the writer, when it gave one.
	AnnotationPublishedBy = "baton.dev/published-by"
	// LabelManagedBy marks the object as Baton's.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is LabelManagedBy's value.
	ManagedBy = "baton"
)

// DefaultMaxAttempts is how many read-modify-write rounds Write makes
// before it gives up on conflicts.
const DefaultMaxAttempts = 8

// Status of the published configuration.
type Status string

// Statuses.
const (
	// StatusValid: the content is the newest valid configuration.
	StatusValid Status = "valid"
	// StatusInvalid: the newest configuration was refused (Reasons say
	// why); the content is the last valid one, if any.
	StatusInvalid Status = "invalid"
)

// Errors of the package.
var (
	// ErrStaleTerm is returned by Write when the object records a term
	// greater than the record's: a newer leader has written it, and this
	// writer is fenced off. It is pkg/fence's, the one every writer of Baton
	// returns; the publisher also returns it when its Lease token shows the
	// term over (Options.LeaseToken).
	ErrStaleTerm = fence.ErrStaleTerm
	// ErrStaleGeneration is returned by Write when the record's content
	// was built from a pod generation below the one the object records:
	// generations only increase across replicas and terms, so such content
	// is older than what is published (a new leader whose discovery lags).
	ErrStaleGeneration = errors.New("configpublisher: object built from a newer pod generation")
	// ErrBadRecord is wrapped by Write for a record it cannot write; the
	// message names the field.
	ErrBadRecord = errors.New("configpublisher: invalid record")
	// ErrBadObject is wrapped by Write and Decode when the stored object's
	// annotations cannot be read.
	ErrBadObject = errors.New("configpublisher: unreadable published object")
	// ErrTooManyConflicts is returned by Write when every attempt lost a
	// compare-and-swap race.
	ErrTooManyConflicts = errors.New("configpublisher: too many write conflicts")
	// ErrNoTerm is returned by Start when its context carries no term: the
	// component was registered as all-replica instead of leader-only.
	ErrNoTerm = errors.New("configpublisher: context carries no leadership term; register the publisher as leader-only")
	// ErrAlreadyRunning is returned by Start while another Start of the
	// same component runs.
	ErrAlreadyRunning = errors.New("configpublisher: already running")
)

// Payload is published content and the versions of the inputs it was built
// from.
type Payload struct {
	// Data replaces the object's data as a whole.
	Data          map[string]string
	ConfigVersion string
	PodGeneration uint64
}

// Record is one write of the published object.
type Record struct {
	// Term is the writer's term; required (non-zero).
	Term uint64
	// Identity, if set, is recorded as the writer.
	Identity string
	// Content is the new content; nil keeps the object's content and its
	// version annotations (a status-only write, as for an invalid
	// configuration that must not replace the last valid one).
	Content *Payload
	// Status is StatusValid or StatusInvalid; Reasons and InvalidVersion go
	// with StatusInvalid and are cleared with StatusValid.
	Status         Status
	Reasons        []string
	InvalidVersion string
	// Lease, if set, is the name of the Lease of the writer's term, and Token that
	// term's token on it: the write carries them for the API server's fence
	// (fence.Stamps.WithLease: the token's annotations and the fence's label).
	Lease string
	Token fence.Token
}

func (r Record) check() error {
	switch {
	case r.Term == 0:
		return fmt.Errorf("%w: term is 0", ErrBadRecord)
	case r.Status != StatusValid && r.Status != StatusInvalid:
		return fmt.Errorf("%w: status %q is neither %q nor %q", ErrBadRecord, r.Status, StatusValid, StatusInvalid)
	case r.Status == StatusInvalid && len(r.Reasons) == 0:
		return fmt.Errorf("%w: status invalid without reasons", ErrBadRecord)
	}
	return nil
}

// WriteResult describes a successful Write.
type WriteResult struct {
	// Object is the stored object; read-only, as every object a store
	// returns (its maps may be the store's, see store.Object).
	Object store.Object
	// Created is true when the object did not exist.
	Created bool
	// Unchanged is true when the object already said what the record says
	// (term included), so nothing was written.
	Unchanged bool
	// Conflicts counts the compare-and-swap races lost before the write.
	Conflicts int
	// NoTermStamp is, when not 0, the term the object carried above the record's that
	// the write replaced: WriteHolding found that this replica still held the Lease in
	// the record's term, so no term of this Lease wrote it.
	NoTermStamp uint64
}

// HoldsLease reports, by one read of the Lease, whether this replica holds it in term
// at the time of the answer (the holder is this replica and term has not ended). A
// later term of the Lease needs a later acquisition, which would have ended term.
type HoldsLease func(ctx context.Context, term uint64) (bool, error)

// Write is the fenced write of the published object: it reads the object,
// refuses with ErrStaleTerm if the term recorded on it is greater than
// rec.Term, with ErrStaleGeneration if rec's content was built from a pod
// generation below the one recorded (generations only increase, across
// replicas and terms), and otherwise writes rec with a compare-and-swap on the
// resourceVersion it read, reading again after a conflict, up to
// DefaultMaxAttempts rounds. A write from a term older than the newest one
// can therefore never land, even when it raced the newer leader's write:
// the newer write changes the resourceVersion, the older one conflicts,
// reads again and sees the newer term. Labels and annotations other than
// Baton's are kept.
func Write(ctx context.Context, s store.Store, rec Record) (WriteResult, error) {
	return write(ctx, s, rec, DefaultMaxAttempts, nil)
}

// WriteHolding is Write that tells a stamp of no term from a newer term's. Before it
// refuses with ErrStaleTerm it calls holds once: if this replica still holds the Lease
// in rec.Term, the object's greater term is from no term of this Lease (restored from
// another cluster, whose Lease counted further, or written by another program), and
// the write replaces it, under the same compare-and-swap, reporting the stamp replaced
// in WriteResult.NoTermStamp (the caller logs it). A nil holds is Write.
//
// After a restore of objects from another cluster, the first write of the current
// leader replaces each such stamp; a restore of this cluster's own etcd, which takes
// the Lease back too, is the elector's case (pkg/k8s/leaderelection, # Terms).
func WriteHolding(ctx context.Context, s store.Store, rec Record, holds HoldsLease) (WriteResult, error) {
	return write(ctx, s, rec, DefaultMaxAttempts, holds)
}

func write(ctx context.Context, s store.Store, rec Record, attempts int, holds HoldsLease) (WriteResult, error) {
	var res WriteResult
	if err := rec.check(); err != nil {
		return res, err
	}
	for range attempts {
		cur, err := s.Get(ctx)
		if errors.Is(err, store.ErrNotFound) {
			obj, _ := apply(store.Object{}, rec)
			res.Object, err = s.Create(ctx, obj)
			if errors.Is(err, store.ErrConflict) {
				res.Conflicts++
				continue
			}
			res.Created = err == nil
			return res, err
		}
		if err != nil {
			return res, err
		}
		recorded, err := termOf(cur)
		if err != nil {
			return res, fmt.Errorf("%w: %s: %w", ErrBadObject, s, err)
		}
		if recorded != res.NoTermStamp {
			replaced, err := fence.Judge(ctx, s.String(), recorded, rec.Term, holdsTerm(holds, rec.Term))
			if err != nil && !errors.Is(err, ErrStaleTerm) {
				return res, fmt.Errorf("configpublisher: %s records term %d above this write's %d, and the Lease could not be read: %w", s, recorded, rec.Term, err)
			}
			if err != nil {
				return res, err
			}
			if replaced != 0 {
				res.NoTermStamp = replaced
			}
		}
		if err := checkGeneration(s, cur, rec); err != nil {
			return res, err
		}
		// cur is read-only: apply copies the maps that change and passes
		// the others on as they are.
		next, changed := apply(cur, rec)
		if !changed {
			res.Object, res.Unchanged = cur, true
			return res, nil
		}
		res.Object, err = s.Update(ctx, next)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			res.Conflicts++
			continue
		}
		return res, err
	}
	return res, fmt.Errorf("%w: %s: %d attempts", ErrTooManyConflicts, s, attempts)
}

// checkGeneration refuses content built from a pod generation below the
// one cur records.
func checkGeneration(s store.Store, cur store.Object, rec Record) error {
	v, ok := cur.Annotations[AnnotationPodGeneration]
	if rec.Content == nil || !ok {
		return nil
	}
	recorded, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s: annotation %s: %q is not a generation", ErrBadObject, s, AnnotationPodGeneration, v)
	}
	if recorded > rec.Content.PodGeneration {
		return fmt.Errorf("%w: %s records pod generation %d, this write's content is of generation %d",
			ErrStaleGeneration, s, recorded, rec.Content.PodGeneration)
	}
	return nil
}

// termOf returns the term o records; 0 when it was never written by a leader.
func termOf(o store.Object) (uint64, error) {
	t, _, err := fence.Stamped(o.Annotations)
	return t, err
}

// holdsTerm is holds of term, for fence.Judge (nil: nil).
func holdsTerm(holds HoldsLease, term uint64) fence.HoldsLease {
	if holds == nil {
		return nil
	}
	return func(ctx context.Context) (bool, error) { return holds(ctx, term) }
}

// apply returns o changed as rec says, and whether anything changed. It
// never modifies o's maps, which are read-only (the store may share them,
// see store.Object): a map that changes is copied first, once, and one that
// does not is passed on as it is. Data that changes becomes a copy of
// rec's, so the object written never shares a map with rec.
func apply(o store.Object, rec Record) (store.Object, bool) {
	labels, a := cow{m: o.Labels}, cow{m: o.Annotations}
	labels.set(LabelManagedBy, ManagedBy)
	a.setUint(AnnotationTerm, rec.Term)
	if rec.Lease != "" {
		tokAnnotations, tokLabels := fence.Stamps{}.WithLease(rec.Lease, rec.Token).Split()
		for k, v := range tokAnnotations {
			a.set(k, v)
		}
		for k, v := range tokLabels {
			labels.set(k, v)
		}
	}
	if rec.Identity != "" {
		a.set(AnnotationPublishedBy, rec.Identity)
	} else {
		a.del(AnnotationPublishedBy)
	}
	dataChanged := false
	if c := rec.Content; c != nil {
		if !maps.Equal(o.Data, c.Data) {
			o.Data, dataChanged = maps.Clone(c.Data), true
		}
		a.set(AnnotationConfigVersion, c.ConfigVersion)
		a.setUint(AnnotationPodGeneration, c.PodGeneration)
	}
	a.set(AnnotationStatus, string(rec.Status))
	if rec.Status == StatusInvalid {
		reasons, _ := json.Marshal(rec.Reasons) // []string always marshals
		a.set(AnnotationReasons, string(reasons))
		a.set(AnnotationInvalidVersion, rec.InvalidVersion)
	} else {
		a.del(AnnotationReasons)
		a.del(AnnotationInvalidVersion)
	}
	o.Labels, o.Annotations = labels.m, a.m
	return o, labels.owned || a.owned || dataChanged
}

// cow changes a read-only map copy-on-write: the first change replaces m
// with a copy of it (a new map when m is nil), which later changes reuse.
// owned reports whether anything changed.
type cow struct {
	m     map[string]string
	owned bool
}

func (c *cow) own() {
	if c.owned {
		return
	}
	c.owned = true
	if c.m == nil {
		c.m = make(map[string]string)
		return
	}
	c.m = maps.Clone(c.m)
}

func (c *cow) set(k, v string) {
	if old, ok := c.m[k]; ok && old == v {
		return
	}
	c.own()
	c.m[k] = v
}

// setUint sets k to n in decimal; it formats n (and allocates) only when
// the value held differs.
func (c *cow) setUint(k string, n uint64) {
	var buf [20]byte
	if old, ok := c.m[k]; ok && old == string(strconv.AppendUint(buf[:0], n, 10)) {
		return
	}
	c.own()
	c.m[k] = strconv.FormatUint(n, 10)
}

func (c *cow) del(k string) {
	if _, ok := c.m[k]; !ok {
		return
	}
	c.own()
	delete(c.m, k)
}

// Published is the published object, decoded.
type Published struct {
	Term           uint64
	PublishedBy    string
	ConfigVersion  string
	PodGeneration  uint64
	Status         Status
	Reasons        []string
	InvalidVersion string
	Data           map[string]string
	// ResourceVersion is the store's version of the object.
	ResourceVersion string
}

// Decode reads the published object's annotations. It returns an error
// wrapping ErrBadObject when one that is present cannot be parsed.
func Decode(o store.Object) (Published, error) {
	o.Data = maps.Clone(o.Data)
	return decodeOwned(o)
}

// decodeOwned is Decode for a read-only object whose Data the result may
// share (read-only as well).
func decodeOwned(o store.Object) (Published, error) {
	p := Published{
		PublishedBy:     o.Annotations[AnnotationPublishedBy],
		ConfigVersion:   o.Annotations[AnnotationConfigVersion],
		Status:          Status(o.Annotations[AnnotationStatus]),
		InvalidVersion:  o.Annotations[AnnotationInvalidVersion],
		Data:            o.Data,
		ResourceVersion: o.ResourceVersion,
	}
	var err error
	if p.Term, err = termOf(o); err != nil {
		return p, fmt.Errorf("%w: %w", ErrBadObject, err)
	}
	if v, ok := o.Annotations[AnnotationPodGeneration]; ok {
		if p.PodGeneration, err = strconv.ParseUint(v, 10, 64); err != nil {
			return p, fmt.Errorf("%w: annotation %s: %q is not a generation", ErrBadObject, AnnotationPodGeneration, v)
		}
	}
	if v, ok := o.Annotations[AnnotationReasons]; ok {
		var reasons []string // not &p.Reasons: p would escape to the heap
		if err := json.Unmarshal([]byte(v), &reasons); err != nil {
			return p, fmt.Errorf("%w: annotation %s: %w", ErrBadObject, AnnotationReasons, err)
		}
		p.Reasons = reasons
	}
	return p, nil
}
