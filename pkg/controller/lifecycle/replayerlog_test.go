package lifecycle_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

type versionEvent struct{}

func (*versionEvent) EventType() string    { return "test.version" }
func (*versionEvent) Timestamp() time.Time { return time.Time{} }

// TestReplayerGetsTheManagersLogger: a StateReplayer registered with the
// Manager logs through the Manager's logger, naming the replayer.
func TestReplayerGetsTheManagersLogger(t *testing.T) {
	var buf bytes.Buffer
	bus := busevents.NewEventBusWithLogger(8, slog.New(slog.DiscardHandler))
	m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r := leadership.NewStateReplayer[*versionEvent](bus)
	if err := m.AddReplayer("version", r); err != nil {
		t.Fatal(err)
	}
	bus.Start()
	defer bus.Stop()
	r.Cache(&versionEvent{})
	r.Replay()
	if !strings.Contains(buf.String(), "replaying versionEvent") || !strings.Contains(buf.String(), "replayer=version") {
		t.Errorf("the Manager's logger got %q", buf.String())
	}
}
