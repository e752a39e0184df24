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

// TestWithLogger: a replayer logs through the logger WithLogger gave it,
// and a nil logger discards.
func TestWithLogger(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(8, slog.New(slog.DiscardHandler))
	bus.Start()
	defer bus.Stop()
	var chosen bytes.Buffer
	r := leadership.NewStateReplayer[*stateEvent](bus).WithLogger(slog.New(slog.NewTextHandler(&chosen, nil)))
	r.Cache(&stateEvent{v: "v1"})
	r.Replay()
	if !strings.Contains(chosen.String(), "replaying stateEvent") {
		t.Errorf("the chosen logger got %q", chosen.String())
	}
	quiet := leadership.NewStateReplayer[*stateEvent](bus).WithLogger(nil)
	quiet.Cache(&stateEvent{v: "v1"})
	if !quiet.Replay() {
		t.Error("a replayer with a nil logger did not replay")
	}
}

// stateEvent is a state event of the test's own: the core's tests need no
// event of the reference controller.
type stateEvent struct{ v string }

func (*stateEvent) EventType() string { return "test.state" }

func (*stateEvent) Timestamp() time.Time { return time.Time{} }
