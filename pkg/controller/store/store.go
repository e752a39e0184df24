package store

import (
	"context"
	"errors"
	"maps"
)

// Errors returned by every Store. Implementations wrap them with detail;
// test with errors.Is.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("store: object not found")
	// ErrConflict: Create found an existing object, or Update was given a
	// resourceVersion that is not the stored one.
	ErrConflict = errors.New("store: conflict")
	// ErrNoResourceVersion: Update was called without a resourceVersion.
	ErrNoResourceVersion = errors.New("store: update without resourceVersion")
)

// Object is the published object. It is a read-only value once passed to
// or returned by a Store: its maps may be shared with the store and with
// other callers (see the package documentation, Sharing); change a copy.
type Object struct {
	// Name is the object's name, set by the store.
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Data        map[string]string
	// ResourceVersion identifies the stored copy; set by the store, and the
	// compare-and-swap token of Update.
	ResourceVersion string
}

// Clone returns a deep copy of o, whose maps the caller owns and may
// change.
func (o Object) Clone() Object {
	o.Labels = maps.Clone(o.Labels)
	o.Annotations = maps.Clone(o.Annotations)
	o.Data = maps.Clone(o.Data)
	return o
}

// Store keeps one named object. See the package documentation for the
// semantics every implementation follows.
type Store interface {
	// Get returns the object, or an error wrapping ErrNotFound. Its maps
	// are read-only: they may be the store's own.
	Get(ctx context.Context) (Object, error)
	// Create stores o as a new object; ErrConflict when it exists. The
	// store takes o's maps over: the caller does not change them after
	// the call. The result, like Update's, is read-only and may share its
	// maps with o and with the stored object.
	Create(ctx context.Context, o Object) (Object, error)
	// Update replaces the object if o.ResourceVersion is the stored one;
	// ErrConflict when it is not, ErrNotFound when the object is gone,
	// ErrNoResourceVersion when o.ResourceVersion is empty. Like Create,
	// it takes o's maps over, and o may carry maps of an object the store
	// returned (the unchanged ones).
	Update(ctx context.Context, o Object) (Object, error)
	// String names the object for logs: "memory/<name>" or "<namespace>/<name>".
	String() string
}
