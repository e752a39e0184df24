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
