package leaderelection_test

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// One candidate on an in-memory lease: it leads with a term, does its work until the
// term context ends, and releases the lease on shutdown.
func Example() {
	store := leaderelection.NewMemoryStore("baton")
	ctx, cancel := context.WithCancel(context.Background())
	elector, err := leaderelection.NewWithStore(leaderelection.Config{

		Identity:        "replica-0",
		LeaseName:       "baton",
		LeaseNamespace:  "default",
		ReleaseOnCancel: true,
	}, store, leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			term, _ := termctx.FromContext(ctx)
			fmt.Println("leading, term", term)
			cancel() // shut down: the term ends with Start's context
			<-ctx.Done()
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := elector.Start(ctx); err != nil {
		fmt.Println(err)
	}
	lease, _ := store.Get(context.Background())
	fmt.Printf("holder after release: %q, lease duration %v\n", lease.HolderIdentity, lease.LeaseDuration)
	// Output:
	// leading, term 1
	// stopped leading
	// holder after release: "", lease duration 1s
}

// Config problems are reported per field.
func ExampleNewWithStore_invalidConfig() {
	_, err := leaderelection.NewWithStore(leaderelection.Config{Identity: "a"},
		leaderelection.NewMemoryStore("baton"), leaderelection.Callbacks{}, nil)
	fmt.Println(err)
	// Output:
	// leaderelection: lease name is empty
	// leaderelection: lease namespace is empty
}

// A leader hands the lease to a named candidate, which takes it on the release's watch
// event, as before a rolling update drains the leader's pod.
func ExampleElector_HandOver() {
	store := leaderelection.NewMemoryStore("baton")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aLeads, bSeesA, bLeads := make(chan struct{}), make(chan struct{}, 1), make(chan uint64, 1)
	config := func(id string) leaderelection.Config {
		return leaderelection.Config{Identity: id, LeaseName: "baton", LeaseNamespace: "default"}
	}
	a, _ := leaderelection.NewWithStore(config("a"), store, leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) { close(aLeads); <-ctx.Done() },
	}, nil)
	b, _ := leaderelection.NewWithStore(config("b"), store, leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			term, _ := termctx.FromContext(ctx)
			bLeads <- term
		},
		OnNewLeader: func(id string) {
			if id == "a" {
				bSeesA <- struct{}{}
			}
		},
	}, nil)
	done := make(chan struct{}, 2)
	go func() { _ = a.Start(ctx); done <- struct{}{} }()
	<-aLeads
	go func() { _ = b.Start(ctx); done <- struct{}{} }()
	<-bSeesA
	fmt.Println("a leads, term", a.Term())
	fmt.Println("hand-over:", a.HandOver(ctx, "b"))
	fmt.Println("b leads, term", <-bLeads)
	cancel()
	<-done
	<-done
	// Output:
	// a leads, term 1
	// hand-over: <nil>
	// b leads, term 3
}

// The clock rate tolerance of a timing: with the defaults (15s/10s) every candidate's
// clock may run up to 20% fast or slow, with 60s/20s up to 50%.
func ExampleConfig_ClockTolerance() {
	fmt.Printf("%.2f\n", leaderelection.Config{}.ClockTolerance())
	fmt.Printf("%.2f\n", leaderelection.Config{LeaseDuration: 60 * time.Second, RenewDeadline: 20 * time.Second}.ClockTolerance())
	// Output:
	// 0.20
	// 0.50
}
