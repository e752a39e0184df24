package leaderelection

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// TestTermContextAnswersTheCoreAccessor: the elector's term context carries
// its term for the core's one accessor, termctx.FromContext, also through
// derived contexts.
func TestTermContextAnswersTheCoreAccessor(t *testing.T) {
	tc := newTermContext(context.Background(), 15, time.Now(), 0, realClock{})
	defer tc.cancel(nil)
	derived, cancel := context.WithCancel(tc)
	defer cancel()
	for name, ctx := range map[string]context.Context{"term context": tc, "derived": derived} {
		if n, ok := termctx.FromContext(ctx); !ok || n != 15 {
			t.Errorf("%s: termctx.FromContext = %d, %v; want 15, true", name, n, ok)
		}
	}
	if _, ok := termctx.FromContext(context.Background()); ok {
		t.Error("termctx.FromContext found a term in a plain context")
	}
}
