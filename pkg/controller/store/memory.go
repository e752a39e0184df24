package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Memory is a Store in process memory. Its resourceVersions come from a
// counter that never goes back, also across Delete. It shares maps (see the
// package documentation, Sharing): Get copies nothing, and a write keeps
// the maps it is given, so a read-modify-write that passes the unchanged
// maps on allocates only for what changed. The zero value is not usable;
// create one with NewMemory.
type Memory struct {
	name  string
	label string // "memory/<name>", made once for String

	// mu guards the fields below.
	mu      sync.Mutex
	obj     Object // the stored object, when present; its maps are never changed
	present bool
	version uint64 // last resourceVersion handed out
	writes  uint64 // successful writes, Set included
	sum     uint64 // checksum of obj's maps, kept when checkShared
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

// Get implements Store. The object returned shares its maps with the store.
func (m *Memory) Get(ctx context.Context) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkLocked()
	if !m.present {
		return Object{}, fmt.Errorf("%w: %s", ErrNotFound, m)
	}
	return m.obj, nil
}

// Create implements Store.
func (m *Memory) Create(ctx context.Context, o Object) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkLocked()
	if m.present {
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
	m.checkLocked()
	if !m.present {
		return Object{}, fmt.Errorf("%w: %s", ErrNotFound, m)
	}
	if m.obj.ResourceVersion != o.ResourceVersion {
		return Object{}, fmt.Errorf("%w: %s has resourceVersion %s, update was for %s", ErrConflict, m, m.obj.ResourceVersion, o.ResourceVersion)
	}
	return m.storeLocked(o), nil
}

// Set overwrites the object unconditionally, creating it if absent, and
// returns what was stored. Like a write, it takes o's maps over. It is for
// tests and demos that play another writer.
func (m *Memory) Set(o Object) Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkLocked()
	return m.storeLocked(o)
}

// Delete removes the object; the next Create starts it afresh with a higher
// resourceVersion. It is for tests and demos.
func (m *Memory) Delete() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkLocked()
	m.obj, m.present = Object{}, false
}

// Writes returns the number of successful writes (Create, Update, Set).
func (m *Memory) Writes() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// storeLocked stores o, maps as given, as the next version and returns it
// with the stored name and resourceVersion: the result shares every map
// with the stored object, and nothing is copied.
func (m *Memory) storeLocked(o Object) Object {
	m.version++
	m.writes++
	o.Name, o.ResourceVersion = m.name, strconv.FormatUint(m.version, 10)
	m.obj, m.present = o, true
	if checkShared {
		m.sum = checksum(o)
	}
	return o
}

// checkLocked panics if a map of the stored object changed since it was
// stored, when checkShared is on (race-detector builds): a caller broke the
// read-only rule of the package documentation.
func (m *Memory) checkLocked() {
	if checkShared && m.present && checksum(m.obj) != m.sum {
		panic(fmt.Sprintf("store: %s: a map of the stored object was modified after it was passed to or returned by the store; objects are read-only, change a copy", m))
	}
}
