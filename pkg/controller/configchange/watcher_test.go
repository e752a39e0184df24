package configchange_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/events"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// The handler publishes one outcome per distinct document, and nothing for
// a document it has already seen.
func TestOutcomesSeenByAWatcher(t *testing.T) {
	eventstest.Bubble(t, func(t *testing.T, bus *busevents.EventBus) {
		w := eventstest.NewWatcher(t, bus)
		h, err := configchange.New(bus, configchange.Options{Source: configchange.Static("test", []byte(docA)), Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- h.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("Start returned %v", err)
			}
		}()

		bind := func(want string) func(*events.ConfigValidatedEvent) bool {
			return func(e *events.ConfigValidatedEvent) bool { return e.Config.Frontends[0].Bind == want }
		}
		if err := eventstest.ExpectExactly(w, bind(":80")); err != nil {
			t.Fatalf("static document: %v", err)
		}
		for range 2 {
			if _, err := h.Update(ctx, []byte(docBad)); !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("Update(bad) = %v, want ErrInvalid", err)
			}
		}
		if err := eventstest.ExpectExactly(w, eventstest.Type[*events.ConfigInvalidEvent]()); err != nil {
			t.Fatalf("the same invalid document twice: %v", err)
		}
		if _, err := h.Update(ctx, []byte(docB)); err != nil {
			t.Fatal(err)
		}
		if err := eventstest.ExpectExactly(w, bind(":81")); err != nil {
			t.Fatalf("a new valid document: %v", err)
		}
		if err := eventstest.ExpectNone(w, time.Minute); err != nil {
			t.Fatal(err)
		}
	})
}
