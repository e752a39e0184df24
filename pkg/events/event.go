package events

import (
	"time"
	"unsafe"
)

// Event is anything published on the bus.
//
// EventType names the kind of event in stable dot notation (for example
// "config.validated"); the bus routes by it. Events are shared by all
// subscribers and must not be modified after they are published.
type Event interface {
	EventType() string
	Timestamp() time.Time
}

// IsNil reports whether e is nil or a typed nil (a nil pointer, map, channel
// or func stored in the interface). The bus never delivers such an event.
func IsNil(e Event) bool {
	if e == nil {
		return true
	}
	// An interface holds a type word and a data word. Pointer-shaped values
	// (pointers, maps, channels, funcs) are stored directly in the data word,
	// so a typed nil leaves it nil; every other value is stored by reference
	// and has a non-nil data word.
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&e))[1] == nil
}
