package app_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
)

// ExampleEmbedded runs one replica of an embedded world: it wins the empty
// lease, and its ConfigPublisher publishes the render of the configuration
// and the pods, stamped with the term.
func ExampleEmbedded() {
	w, err := app.NewEmbedded(app.EmbeddedOptions{Pods: []config.Pod{
		{Namespace: "web", Name: "haproxy-0", IP: "10.0.0.1", Ready: true},
		{Namespace: "web", Name: "haproxy-1", IP: "10.0.0.2", Ready: true},
	}})
	if err != nil {
		panic(err)
	}
	opts := w.Options("replica-a")
	opts.Logger = discard
	published := make(chan configpublisher.Published, 1)
	opts.Hooks.OnPublish = func(r configpublisher.WriteReport) {
		if r.Err == nil && r.Published.PodGeneration > 0 {
			select {
			case published <- r.Published:
			default:
			}
		}
	}
	r, err := app.New(opts)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()

	p := <-published
	fmt.Println("published by", p.PublishedBy, "in term", p.Term, "status", p.Status)
	fmt.Println("server lines:", strings.Count(p.Data[configpublisher.KeyRendered], "    server "))
	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// published by replica-a in term 1 status valid
	// server lines: 2
	// run: <nil>
}
