package configchange_test

import (
	"context"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// BenchmarkUpdate pushes alternating valid documents through a running
// handler: load, cache, publish to one subscriber, and the hand-off to
// Start's goroutine and back.
func BenchmarkUpdate(b *testing.B) {
	bus := busevents.NewEventBusWithLogger(16, discard)
	h, _ := configchange.New(bus, configchange.Options{Source: configchange.Static("bench", []byte(docA)), Logger: discard})
	ch := busevents.Subscribe[busevents.Event](context.Background(), bus, "bench", 1, busevents.Types(stateTypes[0], stateTypes[1:]...), busevents.LatestValue(stateTypes...))
	bus.Start()
	defer bus.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.Start(ctx) }()
	defer func() { cancel(); <-done }()
	<-ch
	docs := [][]byte{[]byte(docB), []byte(docA)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := h.Update(ctx, docs[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
		<-ch
	}
}

// BenchmarkBaselineLoad is config.Load alone, the floor of an Update.
func BenchmarkBaselineLoad(b *testing.B) {
	raw := []byte(docA)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := config.Load(raw); err != nil {
			b.Fatal(err)
		}
	}
}
