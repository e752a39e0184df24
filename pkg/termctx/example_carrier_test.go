package termctx_test

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/termctx"
)

// leaseTerm is a context type of its own that knows its term, as an elector's term
// context does: it answers the term key itself instead of being wrapped by NewContext.
type leaseTerm struct {
	context.Context
	term uint64
}

func (c *leaseTerm) Term() uint64 { return c.term }

func (c *leaseTerm) Value(k any) any {
	if termctx.IsKey(k) {
		return c
	}
	return c.Context.Value(k)
}

func ExampleCarrier() {
	ctx, cancel := context.WithCancel(&leaseTerm{Context: context.Background(), term: 42})
	defer cancel()
	term, ok := termctx.FromContext(ctx) // through the derived context
	fmt.Println(term, ok)
	// Output:
	// 42 true
}
