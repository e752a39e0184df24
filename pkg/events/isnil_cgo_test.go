//go:build cgo

package events_test

import (
	"runtime/cgo"
	"time"
)

// kOpaque may not live in Go's heap (as an incomplete C type), so an
// interface holds a pointer to it boxed rather than in its data word: the
// one pointer kind IsNil cannot answer from the data word.
type kOpaque struct{ _ cgo.Incomplete }

func (*kOpaque) EventType() string    { return "k" }
func (*kOpaque) Timestamp() time.Time { return time.Time{} }

func cgoKindValues() [][]kindValue {
	return [][]kindValue{{{"nil pointer to a type outside Go's heap", (*kOpaque)(nil), true}}}
}
