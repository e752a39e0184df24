package events_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testseed"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// Event types of every kind an Event can have, generic in a tag so that a
// test gets fresh Go types (each IsNil remembers per type; see
// TestIsNilFirstValueOfEachKind).
type (
	kPtr[Tag any]       struct{ v int }
	kMap[Tag any]       map[string]int
	kChan[Tag any]      chan int
	kFunc[Tag any]      func()
	kSlice[Tag any]     []int
	kOnePtr[Tag any]    struct{ p *int }
	kOneMap[Tag any]    struct{ m map[string]int }
	kOneFunc[Tag any]   struct{ f func() }
	kOneChan[Tag any]   struct{ c chan int }
	kNested[Tag any]    struct{ s struct{ p *int } }
	kArrPtr[Tag any]    [1]*int
	kArrTwo[Tag any]    [2]*int
	kArrZero[Tag any]   [0]*int
	kTwoPtrs[Tag any]   struct{ p, q *int }
	kEmpty[Tag any]     struct{}
	kInt[Tag any]       int
	kBool[Tag any]      bool
	kFloat[Tag any]     float64
	kComplex[Tag any]   complex128
	kString[Tag any]    string
	kValueRecv[Tag any] struct{ p *int }
)

func (*kPtr[Tag]) EventType() string      { return "k" }
func (*kPtr[Tag]) Timestamp() time.Time   { return time.Time{} }
func (kMap[Tag]) EventType() string       { return "k" }
func (kMap[Tag]) Timestamp() time.Time    { return time.Time{} }
func (kChan[Tag]) EventType() string      { return "k" }
func (kChan[Tag]) Timestamp() time.Time   { return time.Time{} }
func (kFunc[Tag]) EventType() string      { return "k" }
func (kFunc[Tag]) Timestamp() time.Time   { return time.Time{} }
func (kSlice[Tag]) EventType() string     { return "k" }
func (kSlice[Tag]) Timestamp() time.Time  { return time.Time{} }
func (kOnePtr[Tag]) EventType() string    { return "k" }
func (kOnePtr[Tag]) Timestamp() time.Time { return time.Time{} }
func (kOneMap[Tag]) EventType() string    { return "k" }
func (kOneMap[Tag]) Timestamp() time.Time { return time.Time{} }
func (kOneFunc[Tag]) EventType() string   { return "k" }
func (kOneFunc[Tag]) Timestamp() time.Time {
	return time.Time{}
}
func (kOneChan[Tag]) EventType() string {
	return "k"
}
func (kOneChan[Tag]) Timestamp() time.Time   { return time.Time{} }
func (kNested[Tag]) EventType() string       { return "k" }
func (kNested[Tag]) Timestamp() time.Time    { return time.Time{} }
func (kArrPtr[Tag]) EventType() string       { return "k" }
func (kArrPtr[Tag]) Timestamp() time.Time    { return time.Time{} }
func (kArrTwo[Tag]) EventType() string       { return "k" }
func (kArrTwo[Tag]) Timestamp() time.Time    { return time.Time{} }
func (kArrZero[Tag]) EventType() string      { return "k" }
func (kArrZero[Tag]) Timestamp() time.Time   { return time.Time{} }
func (kTwoPtrs[Tag]) EventType() string      { return "k" }
func (kTwoPtrs[Tag]) Timestamp() time.Time   { return time.Time{} }
func (kEmpty[Tag]) EventType() string        { return "k" }
func (kEmpty[Tag]) Timestamp() time.Time     { return time.Time{} }
func (kInt[Tag]) EventType() string          { return "k" }
func (kInt[Tag]) Timestamp() time.Time       { return time.Time{} }
func (kBool[Tag]) EventType() string         { return "k" }
func (kBool[Tag]) Timestamp() time.Time      { return time.Time{} }
func (kFloat[Tag]) EventType() string        { return "k" }
func (kFloat[Tag]) Timestamp() time.Time     { return time.Time{} }
func (kComplex[Tag]) EventType() string      { return "k" }
func (kComplex[Tag]) Timestamp() time.Time   { return time.Time{} }
func (kString[Tag]) EventType() string       { return "k" }
func (kString[Tag]) Timestamp() time.Time    { return time.Time{} }
func (kValueRecv[Tag]) EventType() string    { return "k" }
func (kValueRecv[Tag]) Timestamp() time.Time { return time.Time{} }

// kindValue is a value of an event type and whether it is nil.
type kindValue struct {
	name string
	e    busevents.Event
	nil  bool
}

// kindValues returns, for every kind of event type tagged Tag, its nil
// value if it has one, then values that are not nil; extra adds the values
// of types this file cannot declare everywhere (see isnil_cgo_test.go).
func kindValues[Tag any]() [][]kindValue {
	x := 1
	vs := [][]kindValue{
		{{"nil pointer", (*kPtr[Tag])(nil), true}, {"pointer", &kPtr[Tag]{}, false}},
		{{"nil map", kMap[Tag](nil), true}, {"empty map", kMap[Tag]{}, false}},
		{{"nil chan", kChan[Tag](nil), true}, {"chan", make(kChan[Tag]), false}},
		{{"nil func", kFunc[Tag](nil), true}, {"func", kFunc[Tag](func() {}), false}},
		{{"nil slice", kSlice[Tag](nil), true}, {"empty slice", kSlice[Tag]{}, false}, {"slice", kSlice[Tag]{1}, false}},
		{{"nil pointer to a type with value methods", (*kValueRecv[Tag])(nil), true}, {"pointer to a type with value methods", &kValueRecv[Tag]{}, false}},
		{{"struct of one nil pointer", kOnePtr[Tag]{}, false}, {"struct of one pointer", kOnePtr[Tag]{p: &x}, false}},
		{{"struct of one nil map", kOneMap[Tag]{}, false}, {"struct of one map", kOneMap[Tag]{m: map[string]int{}}, false}},
		{{"struct of one nil func", kOneFunc[Tag]{}, false}, {"struct of one func", kOneFunc[Tag]{f: func() {}}, false}},
		{{"struct of one nil chan", kOneChan[Tag]{}, false}, {"struct of one chan", kOneChan[Tag]{c: make(chan int)}, false}},
		{{"struct of a struct of one nil pointer", kNested[Tag]{}, false}},
		{{"array of one nil pointer", kArrPtr[Tag]{}, false}, {"array of one pointer", kArrPtr[Tag]{&x}, false}},
		{{"array of two nil pointers", kArrTwo[Tag]{}, false}},
		{{"empty array", kArrZero[Tag]{}, false}},
		{{"struct of two nil pointers", kTwoPtrs[Tag]{}, false}},
		{{"empty struct", kEmpty[Tag]{}, false}},
		{{"value of a type with value methods", kValueRecv[Tag]{}, false}},
		{{"zero int", kInt[Tag](0), false}, {"int", kInt[Tag](7), false}},
		{{"false", kBool[Tag](false), false}},
		{{"zero float", kFloat[Tag](0), false}},
		{{"zero complex", kComplex[Tag](0), false}},
		{{"empty string", kString[Tag](""), false}, {"string", kString[Tag]("x"), false}},
	}
	return append(vs, cgoKindValues[Tag]()...)
}

// reflectIsNil is the reference IsNil is checked against.
func reflectIsNil(e busevents.Event) bool {
	if e == nil {
		return true
	}
	v := reflect.ValueOf(e)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Slice, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

type nilFirst struct{}
type valueFirst struct{}

// IsNil learns each type's shape from the first value it is asked about:
// whether that value is nil or not must not matter, for any kind. Each
// type is asked first about its nil value (nilFirst) or first about a value
// that is not nil (valueFirst), then about all of its values, over and
// over, and the bus must agree: it delivers exactly the events that are
// not nil.
func TestIsNilFirstValueOfEachKind(t *testing.T) {
	check := func(t *testing.T, values [][]kindValue, reverse bool) {
		for _, vs := range values {
			for round := range 3 {
				for j := range vs {
					if reverse {
						j = len(vs) - 1 - j
					}
					v := vs[j]
					if got := busevents.IsNil(v.e); got != v.nil {
						t.Fatalf("round %d: IsNil(%s %#v) = %v, want %v", round, v.name, v.e, got, v.nil)
					}
				}
			}
		}
	}
	t.Run("nil first", func(t *testing.T) { check(t, kindValues[nilFirst](), false) })
	t.Run("value first", func(t *testing.T) { check(t, kindValues[valueFirst](), true) })

	b := busevents.NewEventBus(0)
	t.Cleanup(b.Stop)
	ch := b.Subscribe("all", 64)
	b.Start()
	nils := uint64(0)
	for _, vs := range kindValues[nilFirst]() {
		for _, v := range vs {
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

// IsNil agrees with reflect on every value, whatever order types are first
// seen in and whichever types share a slot of its cache, also when several
// goroutines ask at once. A failure names its seed; BATON_SEED=<seed>
// replays it.
func TestIsNilRandomized(t *testing.T) {
	seeds := testseed.Seeds(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}...)
	var pool []kindValue
	for _, vs := range kindValues[nilFirst]() {
		pool = append(pool, vs...)
	}
	for _, vs := range kindValues[valueFirst]() {
		pool = append(pool, vs...)
	}
	pool = append(pool, kindValue{"nil interface", nil, true})
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			busevents.ForgetNilShapes()
			rng := rand.New(rand.NewPCG(seed, seed))
			var wg sync.WaitGroup
			errs := make(chan string, 4)
			for g := range 4 {
				seq := rng.Uint64()
				wg.Go(func() {
					r := rand.New(rand.NewPCG(seed, seq))
					for i := range 2000 {
						v := pool[r.IntN(len(pool))]
						if got := busevents.IsNil(v.e); got != v.nil || got != reflectIsNil(v.e) {
							errs <- fmt.Sprintf("goroutine %d, call %d: IsNil(%s) = %v, want %v", g, i, v.name, got, v.nil)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("seed %d (replay with BATON_SEED=%d): %s", seed, seed, e)
			}
		})
	}
}
