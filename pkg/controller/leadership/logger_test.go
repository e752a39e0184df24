package leadership_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// TestInheritLogger: a replayer logs through an inherited logger unless
// WithLogger chose one, and a nil logger changes nothing.
func TestInheritLogger(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(8, slog.New(slog.DiscardHandler))
	bus.Start()
	defer bus.Stop()
	var inherited, chosen bytes.Buffer
	logTo := func(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

	r := leadership.NewStateReplayer[*stateEvent](bus)
	r.InheritLogger(nil)
	r.InheritLogger(logTo(&inherited))
	r.Cache(&stateEvent{v: "v1"})
	r.Replay()
	if !strings.Contains(inherited.String(), "replaying stateEvent") {
		t.Errorf("inherited logger got %q", inherited.String())
	}

	inherited.Reset()
	own := leadership.NewStateReplayer[*stateEvent](bus).WithLogger(logTo(&chosen))
	own.InheritLogger(logTo(&inherited))
	own.Cache(&stateEvent{v: "v1"})
	own.Replay()
	if inherited.Len() != 0 || !strings.Contains(chosen.String(), "replaying stateEvent") {
		t.Errorf("WithLogger's logger was replaced: chosen %q, inherited %q", chosen.String(), inherited.String())
	}
}

// stateEvent is a state event of the test's own: the core's tests need no
// event of the reference controller.
type stateEvent struct{ v string }

func (*stateEvent) EventType() string { return "test.state" }

func (*stateEvent) Timestamp() time.Time { return time.Time{} }
