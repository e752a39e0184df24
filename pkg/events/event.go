package events

import (
	"reflect"
	"time"
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

// IsNil reports whether e is nil or a typed nil: a nil pointer, map,
// channel, func, slice or unsafe pointer stored in the interface. Any other
// value, such as a struct (even one whose only field is a nil pointer), is
// not nil. The bus never delivers a nil event.
func IsNil(e Event) bool {
	if e == nil {
		return true
	}
	switch v := reflect.ValueOf(e); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Slice, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}
