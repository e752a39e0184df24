package termrun_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
	"github.com/baton-dev/baton/pkg/termrun"
)

// A work that fails once runs again in the same term, after the restart delay,
// and ends for the term when a run returns nil.
func ExampleTerm_Run() {
	r, err := termrun.New(termrun.Config{
		RestartDelay: time.Millisecond,
		Observe: func(ev termrun.Event) {
			fmt.Printf("%s %s in term %d: %v (restart %v)\n", ev.Work, ev.Kind, ev.Term.Number, ev.Err, ev.Restart)
		},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(termctx.With(context.Background(), termctx.Term{Number: 3}))
	defer cancel()
	runs := 0
	err = r.Term(ctx, nil).Run("publisher", func(ctx context.Context) error {
		runs++
		n, _ := termctx.FromContext(ctx)
		fmt.Printf("run %d in term %d\n", runs, n)
		if runs == 1 {
			return errors.New("write refused")
		}
		return nil
	})
	fmt.Println("Run:", err, "stats:", r.Stats().Started, "started,", r.Stats().Failed, "failed")
	// Output:
	// run 1 in term 3
	// publisher failed in term 3: write refused (restart true)
	// run 2 in term 3
	// Run: <nil> stats: 2 started, 1 failed
}
