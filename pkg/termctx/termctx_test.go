package termctx_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

func TestFromContext(t *testing.T) {
	bg := context.Background()
	outer := termctx.NewContext(bg, 15)
	derived, cancel := context.WithCancel(outer)
	defer cancel()
	inner := termctx.NewContext(derived, 33)
	for _, c := range []struct {
		name string
		ctx  context.Context
		want uint64
		ok   bool
	}{
		{"nil", nil, 0, false},
		{"unstamped", bg, 0, false},
		{"stamped", outer, 15, true},
		{"derived", derived, 15, true},
		{"restamped", inner, 33, true},
		{"term 0 is a term", termctx.NewContext(bg, 0), 0, true},
	} {
		if n, ok := termctx.FromContext(c.ctx); n != c.want || ok != c.ok {
			t.Errorf("%s: FromContext = %d, %v; want %d, %v", c.name, n, ok, c.want, c.ok)
		}
	}
}

func ExampleFromContext() {
	ctx := termctx.NewContext(context.Background(), 15)
	term, ok := termctx.FromContext(ctx)
	fmt.Println(term, ok)
	_, ok = termctx.FromContext(context.Background())
	fmt.Println(ok)
	// Output:
	// 15 true
	// false
}

// TestStampedContext checks that a stamped context is its parent in every
// other respect: values, cancellation, cause, deadline.
func TestStampedContext(t *testing.T) {
	type other struct{}
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), other{}, "v"))
	ctx := termctx.NewContext(parent, 1000)
	if ctx.Value(other{}) != "v" {
		t.Error("a stamped context hides its parent's values")
	}
	if _, ok := ctx.Deadline(); ok {
		t.Error("a stamped context has a deadline its parent has not")
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	cause := fmt.Errorf("over")
	cancel(cause)
	select {
	case <-child.Done():
	default:
		t.Fatal("a context derived from a stamped one did not end with the parent")
	}
	if ctx.Err() != context.Canceled || context.Cause(child) != cause {
		t.Errorf("Err %v, child's cause %v", ctx.Err(), context.Cause(child))
	}
}

// TestGetAndErr: Get gives the whole term, through derived contexts; Err is nil while
// the context the term was stamped on runs, its cause once it ended (also asked
// through a context derived from a later, unrelated value), and ErrNoTerm without one.
func TestGetAndErr(t *testing.T) {
	term := termctx.Term{Lease: termctx.Lease{Namespace: "ns", Name: "ring-shard-3"}, Shard: 3, Shards: 8, Number: 42,
		Token: termctx.Token{Holder: "a", Acquired: time.Unix(1, 0)}}
	parent, cancel := context.WithCancelCause(context.Background())
	ctx := termctx.With(parent, term)
	derived := context.WithValue(ctx, struct{}{}, 1)
	if got, ok := termctx.Get(derived); !ok || got != term || !got.Sharded() {
		t.Fatalf("Get = %+v, %v; want %+v, sharded", got, ok, term)
	}
	if n, ok := termctx.FromContext(derived); !ok || n != 42 {
		t.Errorf("FromContext = %d, %v; want 42", n, ok)
	}
	if err := termctx.Err(derived); err != nil {
		t.Errorf("Err of a running term: %v", err)
	}
	over := errors.New("lease lost")
	cancel(over)
	if err := termctx.Err(derived); err != over {
		t.Errorf("Err of an ended term: %v, want its cause", err)
	}
	if err := termctx.Err(context.Background()); !errors.Is(err, termctx.ErrNoTerm) {
		t.Errorf("Err without a term: %v, want ErrNoTerm", err)
	}
	if single, _ := termctx.Get(termctx.NewContext(context.Background(), 1)); single.Sharded() {
		t.Error("a term stamped by number alone is a shard's")
	}
}

// TestErrReadsTheStampedContext: a context the term was stamped on may report its end
// by a clock of its own (an elector's renew deadline) before anything cancelled it;
// Err asks that context, not the one it is given.
func TestErrReadsTheStampedContext(t *testing.T) {
	clocked := &endedContext{Context: context.Background()}
	ctx, cancel := context.WithCancel(termctx.With(clocked, termctx.Term{Number: 1}))
	defer cancel()
	if termctx.Err(ctx) != nil {
		t.Fatal("Err of a running term")
	}
	clocked.ended = true
	if ctx.Err() != nil {
		t.Fatal("the derived context ended: the test shows nothing")
	}
	if termctx.Err(ctx) == nil {
		t.Error("Err missed the end the stamped context reports")
	}
}

// endedContext reports itself ended, by Err alone, once ended is set.
type endedContext struct {
	context.Context
	ended bool
}

func (c *endedContext) Err() error {
	if c.ended {
		return context.DeadlineExceeded
	}
	return nil
}
