package store

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
)

// Memory is a Store in process memory. Its resourceVersions come from a
// counter that never goes back, also across Delete. The zero value is not
// usable; create one with NewMemory.
type Memory struct {
	name  string
	label string // "memory/<name>", made once for String

	// mu guards the fields below.
	mu      sync.Mutex
	obj     *Object // nil when absent
	version uint64  // last resourceVersion handed out
	writes  uint64  // successful writes, Set included
}

// NewMemory returns an empty store for the object called name.
func NewMemory(name string) (*Memory, error) {
	if name == "" {
		return nil, fmt.Errorf("store: memory object name is empty")
	}
	return &Memory{name: name, label: "memory/" + name}, nil
}

// String returns "memory/<name>".
func (m *Memory) String() string { return m.label }

// Get implements Store.
func (m *Memory) Get(ctx context.Context) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.obj == nil {
		return Object{}, fmt.Errorf("%w: %s", ErrNotFound, m)
	}
	return m.obj.Clone(), nil
}

// Create implements Store.
func (m *Memory) Create(ctx context.Context, o Object) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.obj != nil {
		return Object{}, fmt.Errorf("%w: %s already exists", ErrConflict, m)
	}
	return m.storeLocked(o), nil
}

// Update implements Store.
func (m *Memory) Update(ctx context.Context, o Object) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	if o.ResourceVersion == "" {
		return Object{}, fmt.Errorf("%w: %s", ErrNoResourceVersion, m)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.obj == nil {
		return Object{}, fmt.Errorf("%w: %s", ErrNotFound, m)
	}
	if m.obj.ResourceVersion != o.ResourceVersion {
		return Object{}, fmt.Errorf("%w: %s has resourceVersion %s, update was for %s", ErrConflict, m, m.obj.ResourceVersion, o.ResourceVersion)
	}
	return m.storeLocked(o), nil
}

// Set overwrites the object unconditionally, creating it if absent, and
// returns what was stored. It is for tests and demos that play another
// writer.
func (m *Memory) Set(o Object) Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.storeLocked(o)
}

// Delete removes the object; the next Create starts it afresh with a higher
// resourceVersion. It is for tests and demos.
func (m *Memory) Delete() {
	m.mu.Lock()
	m.obj = nil
	m.mu.Unlock()
}

// Writes returns the number of successful writes (Create, Update, Set).
func (m *Memory) Writes() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// storeLocked stores a copy of o as the next version and returns o itself
// with the stored name and resourceVersion: the caller's object, so
// nothing is copied for it, and nothing it holds aliases the stored copy.
// The stored copy's maps are never changed in place (every write replaces
// the object), so a map equal to the previous version's is shared with it
// rather than copied again: a write that changes only annotations copies
// only them.
func (m *Memory) storeLocked(o Object) Object {
	m.version++
	m.writes++
	var prev Object
	if m.obj != nil {
		prev = *m.obj
	}
	s := Object{
		Name:            m.name,
		Labels:          reuse(prev.Labels, o.Labels),
		Annotations:     reuse(prev.Annotations, o.Annotations),
		Data:            reuse(prev.Data, o.Data),
		ResourceVersion: strconv.FormatUint(m.version, 10),
	}
	m.obj = &s
	o.Name, o.ResourceVersion = s.Name, s.ResourceVersion
	return o
}

// reuse returns stored if it holds what next holds (both non-nil), and a
// copy of next otherwise.
func reuse(stored, next map[string]string) map[string]string {
	if stored != nil && next != nil && maps.Equal(stored, next) {
		return stored
	}
	return maps.Clone(next)
}
