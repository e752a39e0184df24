package termctx_test

import (
	"context"
	"fmt"
	"testing"

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
