package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Memory is a Store in process memory. Its resourceVersions come from a
// counter that never goes back, also across Delete. The zero value is not
// usable; create one with NewMemory.
type Memory struct {
	name string

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
	return &Memory{name: name}, nil
}

// String returns "memory/<name>".
func (m *Memory) String() string { return "memory/" + m.name }

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

func (m *Memory) storeLocked(o Object) Object {
	m.version++
	m.writes++
	s := o.Clone()
	s.Name = m.name
	s.ResourceVersion = strconv.FormatUint(m.version, 10)
	m.obj = &s
	return s.Clone()
}
