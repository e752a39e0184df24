//lint:file-ignore U1000 the fields give each event type its kind; nothing reads them

package events_test

import (
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// Event types of every kind an Event can have.
type (
	kPtr       struct{ v int }
	kMap       map[string]int
	kChan      chan int
	kFunc      func()
	kSlice     []int
	kOnePtr    struct{ p *int }
	kOneMap    struct{ m map[string]int }
	kOneFunc   struct{ f func() }
	kOneChan   struct{ c chan int }
	kNested    struct{ s struct{ p *int } }
	kArrPtr    [1]*int
	kArrTwo    [2]*int
	kArrZero   [0]*int
	kTwoPtrs   struct{ p, q *int }
	kEmpty     struct{}
	kInt       int
	kBool      bool
	kFloat     float64
	kComplex   complex128
	kString    string
	kValueRecv struct{ p *int }
)

func (*kPtr) EventType() string      { return "k" }
func (*kPtr) Timestamp() time.Time   { return time.Time{} }
func (kMap) EventType() string       { return "k" }
func (kMap) Timestamp() time.Time    { return time.Time{} }
func (kChan) EventType() string      { return "k" }
func (kChan) Timestamp() time.Time   { return time.Time{} }
func (kFunc) EventType() string      { return "k" }
func (kFunc) Timestamp() time.Time   { return time.Time{} }
func (kSlice) EventType() string     { return "k" }
func (kSlice) Timestamp() time.Time  { return time.Time{} }
func (kOnePtr) EventType() string    { return "k" }
func (kOnePtr) Timestamp() time.Time { return time.Time{} }
func (kOneMap) EventType() string    { return "k" }
func (kOneMap) Timestamp() time.Time { return time.Time{} }
func (kOneFunc) EventType() string   { return "k" }
func (kOneFunc) Timestamp() time.Time {
	return time.Time{}
}
func (kOneChan) EventType() string {
	return "k"
}
func (kOneChan) Timestamp() time.Time   { return time.Time{} }
func (kNested) EventType() string       { return "k" }
func (kNested) Timestamp() time.Time    { return time.Time{} }
func (kArrPtr) EventType() string       { return "k" }
func (kArrPtr) Timestamp() time.Time    { return time.Time{} }
func (kArrTwo) EventType() string       { return "k" }
func (kArrTwo) Timestamp() time.Time    { return time.Time{} }
func (kArrZero) EventType() string      { return "k" }
func (kArrZero) Timestamp() time.Time   { return time.Time{} }
func (kTwoPtrs) EventType() string      { return "k" }
func (kTwoPtrs) Timestamp() time.Time   { return time.Time{} }
func (kEmpty) EventType() string        { return "k" }
func (kEmpty) Timestamp() time.Time     { return time.Time{} }
func (kInt) EventType() string          { return "k" }
func (kInt) Timestamp() time.Time       { return time.Time{} }
func (kBool) EventType() string         { return "k" }
func (kBool) Timestamp() time.Time      { return time.Time{} }
func (kFloat) EventType() string        { return "k" }
func (kFloat) Timestamp() time.Time     { return time.Time{} }
func (kComplex) EventType() string      { return "k" }
func (kComplex) Timestamp() time.Time   { return time.Time{} }
func (kString) EventType() string       { return "k" }
func (kString) Timestamp() time.Time    { return time.Time{} }
func (kValueRecv) EventType() string    { return "k" }
func (kValueRecv) Timestamp() time.Time { return time.Time{} }

// kindValue is a value of an event type and whether it is nil.
type kindValue struct {
	name string
	e    busevents.Event
	nil  bool
}

// kindValues returns, for every kind of event type, its nil
// value if it has one, then values that are not nil; extra adds the values
// of types this file cannot declare everywhere (see isnil_cgo_test.go).
func kindValues() [][]kindValue {
	x := 1
	vs := [][]kindValue{
		{{"nil pointer", (*kPtr)(nil), true}, {"pointer", &kPtr{}, false}},
		{{"nil map", kMap(nil), true}, {"empty map", kMap{}, false}},
		{{"nil chan", kChan(nil), true}, {"chan", make(kChan), false}},
		{{"nil func", kFunc(nil), true}, {"func", kFunc(func() {}), false}},
		{{"nil slice", kSlice(nil), true}, {"empty slice", kSlice{}, false}, {"slice", kSlice{1}, false}},
		{{"nil pointer to a type with value methods", (*kValueRecv)(nil), true}, {"pointer to a type with value methods", &kValueRecv{}, false}},
		{{"struct of one nil pointer", kOnePtr{}, false}, {"struct of one pointer", kOnePtr{p: &x}, false}},
		{{"struct of one nil map", kOneMap{}, false}, {"struct of one map", kOneMap{m: map[string]int{}}, false}},
		{{"struct of one nil func", kOneFunc{}, false}, {"struct of one func", kOneFunc{f: func() {}}, false}},
		{{"struct of one nil chan", kOneChan{}, false}, {"struct of one chan", kOneChan{c: make(chan int)}, false}},
		{{"struct of a struct of one nil pointer", kNested{}, false}},
		{{"array of one nil pointer", kArrPtr{}, false}, {"array of one pointer", kArrPtr{&x}, false}},
		{{"array of two nil pointers", kArrTwo{}, false}},
		{{"empty array", kArrZero{}, false}},
		{{"struct of two nil pointers", kTwoPtrs{}, false}},
		{{"empty struct", kEmpty{}, false}},
		{{"value of a type with value methods", kValueRecv{}, false}},
		{{"zero int", kInt(0), false}, {"int", kInt(7), false}},
		{{"false", kBool(false), false}},
		{{"zero float", kFloat(0), false}},
		{{"zero complex", kComplex(0), false}},
		{{"empty string", kString(""), false}, {"string", kString("x"), false}},
	}
	return append(vs, cgoKindValues()...)
}

// IsNil answers for every kind of event type, and the bus agrees: it
// delivers exactly the events that are not nil, and counts the others in
// RejectedNil.
func TestIsNilOfEveryKind(t *testing.T) {
	b := busevents.NewEventBus(0)
	t.Cleanup(b.Stop)
	ch := subscribe(b, "all", 64)
	b.Start()
	nils := uint64(0)
	for _, vs := range kindValues() {
		for _, v := range vs {
			if got := busevents.IsNil(v.e); got != v.nil {
				t.Fatalf("IsNil(%s %#v) = %v, want %v", v.name, v.e, got, v.nil)
			}
			want := 1
			if v.nil {
				want = 0
				nils++
			}
			if n := b.Publish(v.e); n != want {
				t.Fatalf("Publish(%s) reached %d subscribers, want %d", v.name, n, want)
			}
			if want == 1 {
				<-ch
			}
		}
	}
	if got := b.Stats().RejectedNil; got != nils {
		t.Fatalf("RejectedNil = %d, want %d (the nil values)", got, nils)
	}
}

// More event values of every kind, for IsNil.
type (
	ptrField   struct{ p *int }
	twoFields  struct{ p, q *int }
	emptyEvent struct{}
	intEvent   int
	strEvent   string
	mapEvent   map[string]int
	funcEvent  func()
	chanEvent  chan int
	sliceEvent []int
	arrayEvent [1]*int
)

func (ptrField) EventType() string      { return "ptr-field" }
func (twoFields) EventType() string     { return "two-fields" }
func (emptyEvent) EventType() string    { return "empty" }
func (intEvent) EventType() string      { return "int" }
func (strEvent) EventType() string      { return "str" }
func (mapEvent) EventType() string      { return "map" }
func (funcEvent) EventType() string     { return "func" }
func (chanEvent) EventType() string     { return "chan" }
func (sliceEvent) EventType() string    { return "slice" }
func (arrayEvent) EventType() string    { return "array" }
func (*ptrField) Timestamp() time.Time  { return time.Time{} }
func (twoFields) Timestamp() time.Time  { return time.Time{} }
func (emptyEvent) Timestamp() time.Time { return time.Time{} }
func (intEvent) Timestamp() time.Time   { return time.Time{} }
func (strEvent) Timestamp() time.Time   { return time.Time{} }
func (mapEvent) Timestamp() time.Time   { return time.Time{} }
func (funcEvent) Timestamp() time.Time  { return time.Time{} }
func (chanEvent) Timestamp() time.Time  { return time.Time{} }
func (sliceEvent) Timestamp() time.Time { return time.Time{} }
func (arrayEvent) Timestamp() time.Time { return time.Time{} }

// valueEvent is a struct whose single field is a pointer, with value
// methods: the value itself is the event.
type valueEvent struct{ p *int }

func (valueEvent) EventType() string    { return "value" }
func (valueEvent) Timestamp() time.Time { return time.Time{} }

// IsNil calls nil exactly the nil values; a struct whose only field is a
// nil pointer is not nil (it once was, and the bus refused it).
func TestIsNilEveryKind(t *testing.T) {
	x := 1
	cases := []struct {
		name string
		e    busevents.Event
		nil  bool
	}{
		{"nil interface", nil, true},
		{"typed nil pointer", (*ev)(nil), true},
		{"typed nil pointer to struct with value methods", (*stateEvent)(nil), true},
		{"pointer", newEv("a", 1), false},
		{"struct with single nil pointer field", valueEvent{}, false},
		{"struct with single non-nil pointer field", valueEvent{p: &x}, false},
		{"pointer to struct with nil field", &ptrField{}, false},
		{"struct with two nil pointer fields", twoFields{}, false},
		{"array of one nil pointer", arrayEvent{}, false},
		{"empty struct", emptyEvent{}, false},
		{"struct", stateEvent{v: 1}, false},
		{"zero int", intEvent(0), false},
		{"empty string", strEvent(""), false},
		{"nil map", mapEvent(nil), true},
		{"map", mapEvent{}, false},
		{"nil func", funcEvent(nil), true},
		{"func", funcEvent(func() {}), false},
		{"nil chan", chanEvent(nil), true},
		{"chan", make(chanEvent), false},
		{"nil slice", sliceEvent(nil), true},
		{"empty slice", sliceEvent{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := busevents.IsNil(c.e); got != c.nil {
				t.Fatalf("IsNil(%#v) = %v, want %v", c.e, got, c.nil)
			}
			// The bus agrees: it delivers exactly the events that are not nil.
			b := eventstest.NewBus(t, 0)
			ch := subscribe(b, "all", 1)
			b.Start()
			want := 1
			if c.nil {
				want = 0
			}
			if n := b.Publish(c.e); n != want || len(eventstest.Drain(ch)) != want {
				t.Fatalf("Publish(%#v) reached %d, want %d", c.e, n, want)
			}
		})
	}
}
