package events

import (
	"reflect"
	"sync/atomic"
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

// IsNil reports whether e is nil or a typed nil: a nil pointer, map,
// channel, func, slice or unsafe pointer stored in the interface. Any other
// value, such as a struct (even one whose only field is a nil pointer), is
// not nil. The bus never delivers a nil event.
//
// Every Publish asks, so the answer for e's Go type is remembered (see
// nilShapes): for most types it then costs a load and a compare.
func IsNil(e Event) bool {
	tab, data := ifaceWords(e)
	switch nilShapes[nilSlot(tab)].Load() {
	case tab | shapeNeverNil:
		return false
	case tab | shapeNilWord:
		return data == 0
	}
	return isNilSlow(e) // also for a nil e: no slot holds 0|shape
}

// ifaceWords returns the two machine words an Event is made of: the first
// identifies its dynamic Go type (for an interface with methods, the
// pointer to the runtime's table of that type's methods for Event, its
// "itab"), the second holds the value or points to it. This is the one
// place the package reads an interface's words.
//
// Why this is sound: every Go implementation since Go 1.4 lays a non-empty
// interface out as those two words (runtime.iface; reflect depends on the
// same layout). An itab is made once per pair of interface and concrete
// type and is never freed (it lives in the binary's read-only data or in
// memory the runtime never releases), so a given tab word means one
// dynamic type for the life of the process; several tab words may mean the
// same type, which costs only a cache slot each. The words are read as
// integers and never turned back into pointers, so the garbage collector
// is not involved.
func ifaceWords(e Event) (tab, data uintptr) {
	w := (*[2]uintptr)(unsafe.Pointer(&e))
	return w[0], w[1]
}

// nilShapes remembers, per dynamic type of the events IsNil was asked
// about, how to tell a nil value of that type. A slot holds a tab word
// (see ifaceWords; a multiple of 8, since an itab starts with a pointer)
// with the shape in its low bits, or 0. A slot is filled once; a type whose
// slot another type took asks reflect every time, which is correct, only
// slower. Two types share a slot only by a hash collision.
var nilShapes [1 << nilShapeBits]atomic.Uintptr

// nilSlot returns the slot of nilShapes for the tab word tab.
func nilSlot(tab uintptr) uintptr { return (tab * 0x9e3779b97f4a7c15) >> (64 - nilShapeBits) }

const nilShapeBits = 7

// Shapes of a dynamic type, for IsNil.
const (
	// shapeNeverNil: not a kind that can be nil (struct, array, string,
	// number, bool, ...), whatever its value; a struct whose only field
	// is a nil pointer is one.
	shapeNeverNil uintptr = 1 + iota
	// shapeNilWord: a pointer, map, channel, func or unsafe pointer kept
	// in the interface's data word itself, so nil exactly when the word
	// is 0.
	shapeNilWord
	// shapeReflect: anything else that can be nil (a slice, or a pointer
	// the interface boxes, such as one to a type that must not live in
	// Go's heap): ask reflect every time.
	shapeReflect
)

// isNilSlow answers IsNil with reflect, and remembers in e's slot of
// nilShapes, if free, the shape of e's type.
//
// A kind that can be nil is shapeNilWord only if a value of its type sits
// in the interface's data word directly. That is a property of the type,
// tested on its zero value, which is nil: stored directly, it leaves the
// data word 0; boxed, the word points to the box. Only then is "the word
// is 0" the same as "the value is nil", for every value of the type.
func isNilSlow(e Event) bool {
	if e == nil {
		return true
	}
	tab, _ := ifaceWords(e)
	v := reflect.ValueOf(e)
	shape, isNil := shapeNeverNil, false
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		isNil, shape = v.IsNil(), shapeReflect
		if zero, ok := reflect.Zero(v.Type()).Interface().(Event); ok {
			if _, data := ifaceWords(zero); data == 0 {
				shape = shapeNilWord
			}
		}
	case reflect.Slice:
		isNil, shape = v.IsNil(), shapeReflect
	}
	nilShapes[nilSlot(tab)].CompareAndSwap(0, tab|shape)
	return isNil
}
